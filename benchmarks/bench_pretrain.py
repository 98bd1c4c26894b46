"""Training tokens/s of `pipeline pretrain` against a plain nanoGPT-style loop, and the loader's
stall fraction.

Both train the same GPT (pipeline.train.model, the recipe's shape) with the same AdamW and
batch. Ours: the Trainer (GlobalSampler + TokenLoader + BatchPrefetcher, doc mask, checkpoint
and eval excluded from the timed steps). Plain: nanoGPT's get_batch, B random offsets into one
np.memmap of the train tokens, x/y slices, causal mask only, torch.from_numpy each step.
The two run in lockstep, one step each in turn, so load on a shared machine hits both alike;
tokens/s come from the median step time. The stall fraction is the prefetcher's: the share of
the loop our training step spent waiting for a batch.

    python benchmarks/bench_pretrain.py [--run data/demo] [--steps 40]

Writes outputs/benchmarks/pretrain.json. Target: ours / plain >= 0.95.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from pipeline.loader import ShardedTokenDataset  # noqa: E402
from pipeline.train.config import load_pretrain_config  # noqa: E402
from pipeline.train.model import GPT, ModelShape  # noqa: E402
from pipeline.train.trainer import Trainer, make_optimizer  # noqa: E402


def token_memmap(ds: ShardedTokenDataset, path: Path) -> np.memmap:
    """The train shards' real tokens (padding dropped) as one flat uint16 file."""
    out = []
    for s in range(0, len(ds), 64):
        b = ds.get_batch(np.arange(s, min(len(ds), s + 64)))
        out.append(b["input_ids"][b["segment_ids"] > 0])
    flat = np.concatenate(out).astype(np.uint16)
    flat.tofile(path)
    return np.memmap(path, dtype=np.uint16, mode="r")


class PlainLoop:
    """nanoGPT's loop: get_batch = B random offsets into one memmap, x/y slices, mean loss."""

    def __init__(self, cfg, data: np.memmap, shape: ModelShape):
        torch.manual_seed(cfg.seed)
        self.cfg, self.data, self.length = cfg, data, shape.seq_len
        self.model = GPT(shape, cfg.dropout)
        self.opt = make_optimizer(self.model, cfg, torch.device("cpu"))
        self.ones = torch.ones(cfg.batch_size, shape.seq_len, dtype=torch.int64)
        self.rng = np.random.default_rng(cfg.seed)

    def step(self) -> None:
        n, data = self.length, self.data
        ix = self.rng.integers(0, len(data) - n - 1, self.cfg.batch_size)
        x = torch.from_numpy(np.stack([data[i : i + n].astype(np.int64) for i in ix]))
        y = torch.from_numpy(np.stack([data[i + 1 : i + 1 + n].astype(np.int64) for i in ix]))
        logits = self.model(x, self.ones)
        loss = torch.nn.functional.cross_entropy(logits.view(-1, logits.shape[-1]), y.view(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.cfg.grad_clip)
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)


def lockstep(cfg, run: Path, data: np.memmap, shape: ModelShape, steps: int, warmup: int):
    """Step times of ours and plain, alternating one step each (load on a shared machine hits
    both alike); returns (ours' step seconds, plain's, ours' stall)."""
    with tempfile.TemporaryDirectory() as tmp:
        tr = Trainer(cfg, run, Path(tmp), progress=False)
        plain = PlainLoop(cfg, data, shape)
        ours_s, plain_s, ours_all = [], [], 0.0
        try:
            for i in range(warmup + steps):
                t0 = time.perf_counter()
                tr.train_step()
                t1 = time.perf_counter()
                plain.step()
                t2 = time.perf_counter()
                ours_all += t1 - t0
                if i >= warmup:
                    ours_s.append(t1 - t0)
                    plain_s.append(t2 - t1)
            stats = tr.stream.stats()
        finally:
            tr.stream.close()
    # the prefetcher's loop time also holds the plain steps: divide by our step time instead
    return ours_s, plain_s, {"stall_s": stats["stall_s"], "fraction": stats["stall_s"] / ours_all}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--config", type=Path, default=ROOT / "recipes" / "pretrain_demo.yaml")
    p.add_argument("--run", type=Path, default=ROOT / "data" / "demo")
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--out", type=Path, default=ROOT / "outputs" / "benchmarks" / "pretrain.json")
    args = p.parse_args()
    cfg = load_pretrain_config(args.config)
    total = args.warmup + args.steps
    cfg = dataclasses.replace(
        cfg, device="cpu", max_steps=total, eval_every=0, save_every=0, eval_texts=[]
    )
    torch.set_num_threads(cfg.threads or torch.get_num_threads())
    ds = ShardedTokenDataset(args.run / "shard" / "train")
    shape = ModelShape(
        int(ds.metadata["vocab_size"]), ds.seq_len, cfg.n_layer, cfg.n_head, cfg.d_model
    )
    with tempfile.TemporaryDirectory() as tmp:
        data = token_memmap(ds, Path(tmp) / "train.bin")
        ours_s, plain_s, stall = lockstep(cfg, args.run, data, shape, args.steps, args.warmup)
    tokens = cfg.batch_size * shape.seq_len
    mine = tokens / statistics.median(ours_s)
    plain = tokens / statistics.median(plain_s)
    ratio = mine / plain
    result = {
        "what": "training tokens/s, pipeline pretrain vs a plain nanoGPT-style loop, CPU",
        "config": str(args.config),
        "run": str(args.run),
        "shape": dataclasses.asdict(shape),
        "batch_size": cfg.batch_size,
        "threads": torch.get_num_threads(),
        "steps_timed": args.steps,
        "method": "lockstep: one step of each in turn; tokens/s from the median step time",
        "ours_tokens_per_s": mine,
        "plain_tokens_per_s": plain,
        "ratio": ratio,
        "ours_step_s": ours_s,
        "plain_step_s": plain_s,
        "ratio_of_sums": sum(plain_s) / sum(ours_s),
        "target_ratio": 0.95,
        "stall_fraction": stall["fraction"],
        "stall_s": stall["stall_s"],
        "machine": platform.processor() or platform.machine(),
        "torch": torch.__version__,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))
    stall = 100 * result["stall_fraction"]
    print(f"ours / plain = {ratio:.3f} (target >= 0.95); stall {stall:.2f}%")
    print(args.out)


if __name__ == "__main__":
    main()
