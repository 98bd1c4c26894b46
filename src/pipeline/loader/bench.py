"""`pipeline bench`: where a training input pipeline's time goes, on real shards.

Plans S steps of a GlobalSampler order (epochs as needed, drop_last), then delivers them through
the preset's cache and transforms, in-process or with DataLoader workers, behind a
BatchPrefetcher. Reports samples/s, tokens/s, MB/s, p50/p99 batch latency (time to produce one
batch: cache lookup, gather, transforms), cache hit rate, shards touched per batch, peak RSS and
stall fraction; writes a JSON with commit, hardware, library versions and the command line.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import json
import os
import platform
import resource
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from pipeline.errors import DataError
from pipeline.loader.cache import BatchCache
from pipeline.loader.dataset import ShardedTokenDataset
from pipeline.loader.prefetch import BatchPrefetcher
from pipeline.loader.step import StepDataset, fetch_batch
from pipeline.loader.transforms import PRESETS, Preset, split_of
from pipeline.progress import Progress

BENCH_PRESETS: dict[str, Preset] = {
    "none": PRESETS["baseline"],
    "cache": Preset("cache", cache_policy="opt", cache_batches=512),
    "augment": PRESETS["baseline_plus"],
}
BENCH_PRESETS.update(PRESETS)  # the named presets work too
ORDERS = ("global", "sequential", "shard_block")


@dataclass
class BenchConfig:
    shards: str
    preset: str = "none"
    order: str = "global"
    batch_size: int = 32
    workers: int = 0
    steps: int = 200
    seed: int = 0
    step_ms: float = 0.0  # simulated training step per batch: shows how much of it hides loading
    max_open_shards: int | None = None  # None: every shard (bounded by the open-file limit)
    window_shards: int = 2
    steps_per_sweep: int = 0  # > 0: StepDataset steps (drawn with replacement) instead of --order
    cache_policy: str | None = None  # overrides the preset's
    cache_batches: int | None = None


def plan_steps(ds: ShardedTokenDataset, cfg: BenchConfig) -> list[tuple[int, int, np.ndarray]]:
    """(epoch, step in epoch, indices) of the first cfg.steps steps, epochs as needed. With
    steps_per_sweep > 0 the steps are a StepDataset's, each sweep in its seeded order: the same
    base batches every sweep, which is what a batch cache can hit."""
    from pipeline.loader.sampler import GlobalSampler

    if len(ds) == 0:  # e.g. shard/eval of a run with shard.eval_fraction=0
        raise DataError(str(ds.path), "holds no samples (num_samples 0): nothing to bench")
    if cfg.steps_per_sweep > 0:
        steps = StepDataset(ds, cfg.batch_size, seed=cfg.seed, steps_per_sweep=cfg.steps_per_sweep)
        sweeps = -(-cfg.steps // len(steps))
        plan = [(e, int(t), steps.indices(int(t))) for e in range(sweeps) for t in steps.order(e)]
        return plan[: cfg.steps]

    sampler = GlobalSampler(
        len(ds),
        cfg.batch_size,
        seed=cfg.seed,
        order=cfg.order,
        drop_last=len(ds) >= cfg.batch_size,
        shard_sizes=ds.shard_sizes,
        window_shards=cfg.window_shards,
    )
    plan: list[tuple[int, int, np.ndarray]] = []
    epoch = 0
    while len(plan) < cfg.steps:
        sampler.set_epoch(epoch)
        before = len(plan)
        for t, idx in enumerate(sampler):
            plan.append((epoch, t, np.asarray(idx, np.int64)))
            if len(plan) == cfg.steps:
                break
        if len(plan) == before:  # an epoch without a step: every later one is the same
            raise DataError(
                str(ds.path),
                f"{len(ds)} samples make no batch of {cfg.batch_size}: nothing to bench",
            )
        epoch += 1
    return plan


class PlanDataset:
    """Map-style over planned steps: item i -> (batch, seconds it took to produce)."""

    def __init__(self, ds, plan, cache: BatchCache | None, augment):
        self.ds, self.plan, self.cache, self.augment = ds, plan, cache, augment

    def __len__(self) -> int:
        return len(self.plan)

    def __getitem__(self, i: int) -> tuple[dict[str, np.ndarray], float]:
        t0 = time.perf_counter()
        epoch, step, idx = self.plan[i]
        batch = fetch_batch(
            self.ds.get_batch, idx, cache=self.cache, augment=self.augment, epoch=epoch, step=step
        )
        return batch, time.perf_counter() - t0


def _identity(item: Any) -> Any:
    return item


def _items(source: PlanDataset, workers: int):
    if workers == 0:
        return (source[i] for i in range(len(source)))
    import torch

    return torch.utils.data.DataLoader(
        source, batch_size=None, num_workers=workers, collate_fn=_identity, prefetch_factor=2
    )


def run_bench(cfg: BenchConfig, *, progress: bool = True) -> dict[str, Any]:
    """Run the benchmark; the result dict (metrics + config, no environment)."""
    if cfg.preset not in BENCH_PRESETS:
        raise ValueError(
            f"bench preset must be one of {', '.join(BENCH_PRESETS)}, got {cfg.preset}"
        )
    if cfg.order not in ORDERS:
        raise ValueError(f"bench order must be one of {', '.join(ORDERS)}, got {cfg.order}")
    if cfg.batch_size < 1 or cfg.steps < 1 or cfg.workers < 0 or cfg.steps_per_sweep < 0:
        raise ValueError("batch size and steps must be >= 1, workers and steps per sweep >= 0")
    preset = BENCH_PRESETS[cfg.preset]
    if cfg.cache_policy is not None or cfg.cache_batches is not None:
        policy = cfg.cache_policy or preset.cache_policy
        size = cfg.cache_batches if cfg.cache_batches is not None else preset.cache_batches or 512
        preset = dataclasses.replace(preset, cache_policy=policy, cache_batches=size)
    ds = ShardedTokenDataset(cfg.shards, max_open_shards=cfg.max_open_shards)
    plan = plan_steps(ds, cfg)
    bounds = np.cumsum([0, *ds.shard_sizes])
    touched = [len(np.unique(np.searchsorted(bounds, idx, side="right"))) for _, _, idx in plan]
    cache = None
    if preset.cache_policy != "none":
        trace = [idx for _, _, idx in plan] if preset.cache_policy == "opt" else None
        cache = BatchCache(
            preset.cache_policy, preset.cache_batches, trace=trace, shared=cfg.workers > 0
        )
    split = split_of(ds.path, ds.metadata)
    augment = preset.augment(pad_id=int(ds.metadata.get("pad_id") or 0), split=split)
    source = PlanDataset(ds, plan, cache, augment)
    bar = Progress(len(plan), "bench", enabled=progress, unit="batches")
    latencies, nbytes, token_bytes, samples, tokens = [], 0, 0, 0, 0
    prefetcher = BatchPrefetcher(_items(source, cfg.workers), "cpu")
    try:
        for batch, latency in prefetcher:
            latencies.append(float(latency))
            ids = batch["input_ids"]
            nbytes += sum(int(v.nbytes) for v in batch.values())
            token_bytes += int(ids.nbytes)
            samples += int(ids.shape[0])
            tokens += int(ids.size)
            if cfg.step_ms:
                time.sleep(cfg.step_ms / 1000)
            bar.update()
    finally:
        bar.close()
        if cache is not None:
            cache_stats = cache.stats()
            cache.close()
    stats = prefetcher.stats()
    secs = max(stats["loop_s"], 1e-9)
    lat = np.asarray(latencies)
    return {
        "config": asdict(cfg),
        "split": split,
        "num_samples": len(ds),
        "seq_len": ds.seq_len,
        "batches": stats["batches"],
        "seconds": secs,
        "samples_per_s": samples / secs,
        "tokens_per_s": tokens / secs,
        "mb_per_s": nbytes / secs / 1e6,
        "token_mb_per_s": token_bytes / secs / 1e6,
        "latency_p50_ms": float(np.percentile(lat, 50) * 1e3),
        "latency_p99_ms": float(np.percentile(lat, 99) * 1e3),
        "cache": cache_stats if cache is not None else None,
        "cache_hit_rate": cache_stats["hit_rate"] if cache is not None else 0.0,
        "shards_per_batch": float(np.mean(touched)),
        "peak_rss_mb": peak_rss_mb(),
        "stall_s": stats["stall_s"],
        "stall_fraction": stats["stall_fraction"],
        "augmented": augment is not None,
    }


def peak_rss_mb() -> float:
    """This process's peak RSS (VmHWM; ru_maxrss where /proc is missing)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def environment(command: list[str] | None = None) -> dict[str, Any]:
    """commit, hardware, library versions and the command line, for a benchmark JSON."""
    here = Path(__file__).resolve().parent
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=here, capture_output=True, text=True, timeout=10
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=here, capture_output=True, text=True, timeout=10,
        ).stdout.strip()  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        commit, dirty = "", ""
    versions = {"python": platform.python_version(), "numpy": np.__version__}
    for dist in ("torch", "pipeline"):  # metadata only: importing torch costs seconds
        try:
            versions[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            versions[dist] = None
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            names = [ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")]
        cpu = names[0] if names else cpu
    except OSError:
        pass
    try:
        mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    except (ValueError, OSError):
        mem = None
    return {
        "commit": (commit or "unknown") + ("-dirty" if dirty else ""),
        "hardware": {
            "cpu": cpu,
            "cpus": os.cpu_count(),
            "memory_gib": round(mem, 1) if mem else None,
            "machine": platform.machine(),
            "system": platform.platform(),
        },
        "versions": versions,
        "command": " ".join(command if command is not None else [sys.executable, *sys.argv]),
        "time_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def write_result(result: dict[str, Any], out_dir: str | Path, name: str) -> Path:
    """JSON written to a temp name then renamed."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{name}.json"
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(result, indent=2) + "\n")
    os.replace(tmp, path)
    return path


def format_table(r: dict[str, Any]) -> str:
    """One screen: what was run and each metric with its unit."""
    c = r["config"]
    cache = r["cache"]
    order = c["order"] if not c["steps_per_sweep"] else f"steps, {c['steps_per_sweep']} per sweep"
    hit = (
        f"{r['cache_hit_rate']:.1%} ({cache['hits']} hits, {cache['evictions']} evictions)"
        if cache
        else "no cache"
    )
    rows = [
        ("shards", f"{c['shards']} ({r['num_samples']:,} samples, seq_len {r['seq_len']})"),
        ("preset / order", f"{c['preset']} / {order}  (augmented: {r['augmented']})"),
        ("batch x workers", f"{c['batch_size']} x {c['workers']} workers, {r['batches']} steps"),
        ("samples/s", f"{r['samples_per_s']:,.0f}"),
        ("tokens/s", f"{r['tokens_per_s']:,.0f}"),
        ("MB/s", f"{r['mb_per_s']:,.0f} all fields, {r['token_mb_per_s']:,.0f} input_ids"),
        ("batch latency", f"p50 {r['latency_p50_ms']:.2f} ms, p99 {r['latency_p99_ms']:.2f} ms"),
        ("cache hit rate", hit),
        ("shards/batch", f"{r['shards_per_batch']:.2f}"),
        ("peak RSS", f"{r['peak_rss_mb']:,.0f} MB"),
        ("stall", f"{r['stall_fraction']:.1%} of the loop ({r['stall_s']:.2f} s)"),
    ]
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k:<{width}}  {v}" for k, v in rows)
