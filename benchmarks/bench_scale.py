"""Scale benchmark (not CI): the whole pipeline on a generated corpus of real-text-derived
documents, per-stage throughput, peak RSS of every process, driver bytes per document, and
scaling from 1 to 2 workers (local pool) and on a local 2-node Ray cluster.

    .venv/bin/python benchmarks/bench_scale.py --mb 100 [--configs local1,local2,ray2] [--trace]

Corpus: English documents from /work/shared/corpora (TinyStories stories, WikiText-2 raw
articles, Dolma CC and C4 web pages, Tiny Shakespeare in 60-line scenes), copied until `--mb`
megabytes of text. Copy k of a document has ~8% of its words replaced by words drawn from the
same document (seeded by copy and document), so copies are distinct to MinHash (5-gram Jaccard
~0.6) but read like the source; 1 document in 50 is an exact copy of the one before and 1 in 50
a near copy (1% of words changed), so dedup has real work.

Each configuration runs in its own subprocess. A sampler thread reads /proc every 0.25 s: the
RSS of the driver and of every other process of the run (pool workers, or the Ray processes
under the cluster this script starts), per stage. `--trace` adds a run with tracemalloc in the
driver (2 local workers, so per-part work is not in the driver): its per-stage peak over the
stage-start level, per input document. `--reference-chars` shrinks quality's reference (and
so its LM, whose fit is that stage's traced peak) to expose the per-document term. The 2-node
cluster is two `ray start` on this machine (1 CPU each, their own temp dir and ports); it is
stopped by the ids of its processes.
Writes outputs/benchmarks/scale.json.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

CORPORA = Path("/work/shared/corpora")
OUT = ROOT / "outputs" / "benchmarks" / "scale.json"
STAGES = ("download", "clean", "dedup", "quality", "tokenize", "pack", "shard")


# ---------------------------------------------------------------- corpus


def base_documents() -> list[str]:
    docs: list[str] = []
    for name in ("tinystories_sample.txt", "TinyStories-valid-reduced.txt"):
        text = (CORPORA / "tinystories" / name).read_text(encoding="utf-8", errors="replace")
        docs += [d.strip() for d in text.split("<|endoftext|>") if len(d.split()) > 60]
    raw = (CORPORA / "wikitext-2-raw" / "wiki.test.raw").read_text(encoding="utf-8")
    docs += [a.strip() for a in re.split(r"\n ?= [^=\n]+ = ?\r?\n", raw) if len(a.split()) > 60]
    for path in sorted((CORPORA / "dolma_cc_web").glob("*.jsonl*")) + sorted(
        (CORPORA / "c4_sample").glob("*.json.gz")
    ):
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rt", encoding="utf-8") as f:
            for line in f:
                try:
                    text = json.loads(line).get("text", "")
                except ValueError:
                    continue
                if len(text.split()) > 60:
                    docs.append(text)
    lines = (CORPORA / "tinyshakespeare" / "input.txt").read_text().splitlines()
    docs += ["\n".join(lines[i : i + 60]) for i in range(0, len(lines), 60)]
    return docs


def perturb(text: str, rng: random.Random, rate: float) -> str:
    parts = re.split(r"(\s+)", text)
    words = parts[0::2]
    pool = [w for w in words if w]
    for i in range(len(words)):
        if words[i] and rng.random() < rate:
            words[i] = rng.choice(pool)
    parts[0::2] = words
    return "".join(parts)


def make_corpus(path: Path, mb: float, seed: int = 0) -> dict:
    docs = base_documents()
    target = int(mb * 1e6)
    n = size = 0
    prev = ""
    with open(path, "w", encoding="utf-8") as f:
        k = 0
        while size < target:
            for i, doc in enumerate(docs):
                rng = random.Random(f"{seed}:{k}:{i}")
                roll = rng.random()
                if roll < 0.02 and prev:
                    text = prev  # exact duplicate
                elif roll < 0.04 and prev:
                    text = perturb(prev, rng, 0.01)  # near duplicate
                else:
                    text = perturb(doc, rng, 0.08) if k else doc
                f.write(json.dumps({"id": f"c{k}-{i}", "text": text}) + "\n")
                size += len(text.encode("utf-8"))
                n += 1
                prev = text
                if size >= target:
                    break
            k += 1
    return {"docs": n, "text_bytes": size, "base_docs": len(docs), "copies": k}


# ---------------------------------------------------------------- RSS sampling


def _rss(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _tree(roots: set[int]) -> set[int]:
    """The root pids and all their descendants."""
    parent: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    stat = f.read()
                parent[int(entry)] = int(stat.rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    out, grew = set(roots), True
    while grew:
        new = {p for p, pp in parent.items() if pp in out and p not in out}
        out |= new
        grew = bool(new)
    return out


class Sampler(threading.Thread):
    """Peak RSS of the driver and of the largest other process, per stage label."""

    def __init__(self, extra_roots: set[int]):
        super().__init__(daemon=True)
        self.me = os.getpid()
        self.roots = {self.me} | extra_roots
        self.stage = "setup"
        self.peaks: dict[str, dict[str, int]] = {}
        self.stop = False

    def run(self) -> None:
        while not self.stop:
            self.sample()
            time.sleep(0.25)

    def sample(self) -> None:
        pids = _tree(self.roots)
        driver = _rss(self.me)
        others = max((_rss(p) for p in pids if p != self.me), default=0)
        total = driver + sum(_rss(p) for p in pids if p != self.me)
        cur = self.peaks.setdefault(self.stage, {"driver": 0, "worker_max": 0, "sum": 0})
        cur["driver"] = max(cur["driver"], driver)
        cur["worker_max"] = max(cur["worker_max"], others)
        cur["sum"] = max(cur["sum"], total)


# ---------------------------------------------------------------- one configuration (child)


def run_config(args: argparse.Namespace) -> dict:
    import tracemalloc

    import pipeline.stages as stages_mod
    from pipeline.recipe import build_recipe
    from pipeline.report import load_report
    from pipeline.run.runner import run_recipe

    roots = {int(p) for p in args.roots.split(",") if p} if args.roots else set()
    sampler = Sampler(roots)
    sampler.start()
    stage_start_rss: dict[str, int] = {}
    traced: dict[str, dict[str, int]] = {}
    for name, stage in list(stages_mod.STAGES.items()):

        def wrapped(cfg, ctx, _run=stage.run, _name=name):
            sampler.sample()
            sampler.stage = _name
            stage_start_rss[_name] = _rss(os.getpid())
            if args.trace:
                tracemalloc.start()
                start = tracemalloc.get_traced_memory()[0]
            try:
                return _run(cfg, ctx)
            finally:
                if args.trace:
                    _, peak = tracemalloc.get_traced_memory()
                    traced[_name] = {"start": start, "peak": peak}
                    tracemalloc.stop()
                sampler.sample()
                sampler.stage = "between"

        stages_mod.STAGES[name] = type(stage)(stage.name, stage.config_cls, wrapped, stage.version)
    executor = {"kind": "ray", "address": "auto"} if args.kind == "ray" else {"kind": "local"}
    raw = {
        "name": "scale",
        "seed": 1,
        "out_dir": args.run_dir,
        "workers": args.workers,
        "executor": executor,
        "download": {"source": "jsonl", "path": args.corpus, "docs_per_part": args.docs_per_part},
        "clean": {"max_fineweb_dup_line_chars_frac": 0.1},
        "dedup": {},
        "quality": {"reference_max_chars": args.reference_chars} if args.reference_chars else {},
        "tokenize": {"vocab_size": 8192, "max_train_bytes": args.train_bytes},
        "pack": {"seq_len": 1024},
        "shard": {"shard_size": 1024},
    }
    for item in args.set:  # --set pack.window_docs=2000: force a bounded path at a small size
        key, _, value = item.partition("=")
        stage, _, field = key.partition(".")
        raw.setdefault(stage, {})[field] = yaml.safe_load(value)
    t0 = time.perf_counter()
    run_recipe(build_recipe(raw), progress=False)
    wall = time.perf_counter() - t0
    sampler.stop = True
    sampler.join()
    report = load_report(Path(args.run_dir))
    stages = {}
    for entry in report["stages"]:
        name, st = entry["stage"], entry["stats"]
        docs = st.get("docs_in") or st.get("sequences_in") or 0
        peak = sampler.peaks.get(name, {})
        row = {
            "seconds": entry["seconds"],
            "docs_in": docs,
            "mb_in": round(st.get("bytes_in", 0) / 1e6, 2),
            "driver_peak_rss_mb": round(peak.get("driver", 0) / 1e6, 1),
            "worker_peak_rss_mb": round(peak.get("worker_max", 0) / 1e6, 1),
            "all_processes_peak_rss_mb": round(peak.get("sum", 0) / 1e6, 1),
            "driver_rss_growth_bytes_per_doc": round(
                (peak.get("driver", 0) - stage_start_rss.get(name, 0)) / max(docs, 1), 1
            ),
        }
        if name in traced:
            t = traced[name]
            row["driver_traced_bytes_per_doc"] = round((t["peak"] - t["start"]) / max(docs, 1), 1)
        stages[name] = row
    return {"wall_seconds": round(wall, 1), "stages": stages}


# ---------------------------------------------------------------- 2-node Ray cluster


class LocalCluster:
    """Two `ray start` nodes of 1 CPU on this machine, in a private temp dir; stopped by the ids
    of the processes whose command line names that temp dir (never `ray stop`)."""

    def __init__(self, port: int):
        self.tmp = Path(tempfile.mkdtemp(prefix="rs-", dir="/tmp"))
        self.port = port
        self.env = {**os.environ, "RAY_AUTH_MODE": "disabled"}

    def start(self) -> str:
        ray = str(Path(sys.executable).parent / "ray")
        common = ["--num-cpus=1", f"--temp-dir={self.tmp}", "--disable-usage-stats"]
        head = [ray, "start", "--head", f"--port={self.port}", "--include-dashboard=false"]
        subprocess.run(
            head + common + ["--node-manager-port=0", "--object-manager-port=0"],
            env=self.env,
            check=True,
            capture_output=True,
        )
        address = f"127.0.0.1:{self.port}"
        subprocess.run(
            [ray, "start", f"--address={address}", *common],
            env=self.env,
            check=True,
            capture_output=True,
        )
        return address

    def pids(self) -> list[int]:
        out = []
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    cmd = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ")
                except OSError:
                    continue
                if str(self.tmp).encode() in cmd:
                    out.append(int(entry))
        return out

    def stop(self) -> None:
        import signal

        for _ in range(3):
            pids = _tree(set(self.pids())) - {os.getpid()}
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGTERM if _ == 0 else signal.SIGKILL)
                except OSError:
                    pass
            time.sleep(2)


# ---------------------------------------------------------------- orchestration


def child(cmd_args: list[str], env: dict | None = None, timeout: float = 3600) -> dict:
    res = subprocess.run(
        [sys.executable, __file__, "--child", *cmd_args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if res.returncode != 0:
        raise RuntimeError(f"child failed: {res.stderr[-3000:]}")
    return json.loads(res.stdout.strip().splitlines()[-1])


def efficiency(one: dict, two: dict) -> dict:
    out = {}
    for name, row in one["stages"].items():
        t1, t2 = row["seconds"], two["stages"][name]["seconds"]
        out[name] = {
            "speedup": round(t1 / max(t2, 1e-9), 2),
            "efficiency": round(t1 / max(2 * t2, 1e-9), 2),
        }
    out["total"] = {
        "speedup": round(one["wall_seconds"] / two["wall_seconds"], 2),
        "efficiency": round(one["wall_seconds"] / (2 * two["wall_seconds"]), 2),
    }
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=float, default=100.0, help="corpus size in MB of text")
    ap.add_argument("--configs", default="local1,local2,ray2")
    ap.add_argument("--trace", action="store_true", help="add a tracemalloc run (local, 2)")
    ap.add_argument("--docs-per-part", type=int, default=2000)
    ap.add_argument("--train-bytes", type=int, default=20_000_000)
    ap.add_argument("--port", type=int, default=6391)
    ap.add_argument(
        "--reference-chars",
        type=int,
        default=0,
        help="quality.reference_max_chars (0: the default); small: the LM's constant no longer "
        "hides the driver's per-document bytes in the traced peak",
    )
    ap.add_argument(
        "--set", action="append", default=[], help="recipe override stage.key=YAML (repeatable)"
    )
    ap.add_argument("--work", default=None, help="work folder (default: a new temp dir)")
    ap.add_argument("--out", type=Path, default=OUT, help="JSON file to write")
    # child mode
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--corpus", help=argparse.SUPPRESS)
    ap.add_argument("--run-dir", help=argparse.SUPPRESS)
    ap.add_argument("--workers", type=int, default=1, help=argparse.SUPPRESS)
    ap.add_argument("--kind", default="local", help=argparse.SUPPRESS)
    ap.add_argument("--roots", default="", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(run_config(args)))
        return 0
    work = Path(args.work or tempfile.mkdtemp(prefix="bench-scale-"))
    work.mkdir(parents=True, exist_ok=True)
    corpus = work / "corpus.jsonl"
    t0 = time.perf_counter()
    info = make_corpus(corpus, args.mb)
    info["generate_seconds"] = round(time.perf_counter() - t0, 1)
    print(f"corpus: {info}", file=sys.stderr)
    common = [
        f"--corpus={corpus}",
        f"--docs-per-part={args.docs_per_part}",
        f"--train-bytes={args.train_bytes}",
        f"--reference-chars={args.reference_chars}",
        *(f"--set={s}" for s in args.set),
    ]
    results: dict = {"corpus": info, "cpus": os.cpu_count(), "configs": {}}
    for cfg in [c for c in args.configs.split(",") if c]:
        run_dir = work / cfg
        if cfg.startswith("local"):
            workers = int(cfg[5:])
            results["configs"][cfg] = child(
                [*common, f"--run-dir={run_dir}", f"--workers={workers}"]
            )
        elif cfg == "ray2":
            cluster = LocalCluster(args.port)
            try:
                address = cluster.start()
                env = {**cluster.env, "RAY_ADDRESS": address}
                roots = ",".join(str(p) for p in cluster.pids())
                results["configs"][cfg] = child(
                    [*common, f"--run-dir={run_dir}", "--kind=ray", f"--roots={roots}"], env=env
                )
            finally:
                cluster.stop()
        print(f"{cfg}: {json.dumps(results['configs'].get(cfg))}", file=sys.stderr)
    if args.trace:
        results["traced_local2"] = child(
            [*common, f"--run-dir={work / 'trace'}", "--workers=2"] + ["--trace"]
        )
    confs = results["configs"]
    if "local1" in confs and "local2" in confs:
        results["scaling_local_1_to_2"] = efficiency(confs["local1"], confs["local2"])
    if "local1" in confs and "ray2" in confs:
        results["scaling_local1_to_ray_2_nodes"] = efficiency(confs["local1"], confs["ray2"])
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
