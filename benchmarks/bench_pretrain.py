"""Training tokens/s of `pipeline pretrain` against a plain nanoGPT-style loop, and the loader's
stall fraction.

Both train the same GPT (pipeline.train.model, the recipe's shape) with the same AdamW and
batch. Ours: the Trainer (GlobalSampler + TokenLoader + BatchPrefetcher, doc mask, checkpoint
and eval excluded from the timed steps). Plain: nanoGPT's get_batch, B random offsets into one
np.memmap of the train tokens, x/y slices, causal mask only, torch.from_numpy each step.
Rounds alternate (ours, plain, ours, ...) so load on a shared machine hits both alike.

    python benchmarks/bench_pretrain.py [--run data/demo] [--steps 30] [--rounds 3]

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


def plain_loop(cfg, data: np.memmap, shape: ModelShape, steps: int, warmup: int) -> float:
    """nanoGPT's loop; returns tokens/s over the steps after `warmup`."""
    torch.manual_seed(cfg.seed)
    model = GPT(shape, cfg.dropout)
    opt = make_optimizer(model, cfg, torch.device("cpu"))
    b, length = cfg.batch_size, shape.seq_len
    ones = torch.ones(b, length, dtype=torch.int64)
    rng = np.random.default_rng(cfg.seed)
    t0 = 0.0
    for step in range(warmup + steps):
        if step == warmup:
            t0 = time.perf_counter()
        ix = rng.integers(0, len(data) - length - 1, b)
        x = torch.from_numpy(np.stack([data[i : i + length].astype(np.int64) for i in ix]))
        y = torch.from_numpy(np.stack([data[i + 1 : i + 1 + length].astype(np.int64) for i in ix]))
        logits = model(x, ones)
        loss = torch.nn.functional.cross_entropy(logits.view(-1, logits.shape[-1]), y.view(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
        opt.step()
        opt.zero_grad(set_to_none=True)
    return steps * b * length / (time.perf_counter() - t0)


def ours(cfg, run: Path, steps: int, warmup: int) -> tuple[float, float]:
    """(tokens/s after `warmup` steps, stall fraction) of the Trainer."""
    with tempfile.TemporaryDirectory() as tmp:
        tr = Trainer(cfg, run, Path(tmp), progress=False)
        tr.run(stop_at=warmup)  # warm-up steps (checkpoint at the stop, not timed below)
        tr2 = Trainer(cfg, run, Path(tmp), resume=True, progress=False)
        rep = tr2.run(stop_at=warmup + steps)
    return rep["tokens_per_s"], rep["stall_fraction"]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--config", type=Path, default=ROOT / "recipes" / "pretrain_demo.yaml")
    p.add_argument("--run", type=Path, default=ROOT / "data" / "demo")
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--rounds", type=int, default=3)
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
        mine, plain, stalls = [], [], []
        for r in range(args.rounds):
            tok_s, stall = ours(cfg, args.run, args.steps, args.warmup)
            mine.append(tok_s)
            stalls.append(stall)
            plain.append(plain_loop(cfg, data, shape, args.steps, args.warmup))
            print(f"round {r}: ours {mine[-1]:,.0f} tok/s, plain {plain[-1]:,.0f} tok/s, "
                  f"stall {100 * stall:.2f}%", file=sys.stderr)  # fmt: skip
    ratio = statistics.median(m / q for m, q in zip(mine, plain, strict=True))
    result = {
        "what": "training tokens/s, pipeline pretrain vs a plain nanoGPT-style loop, CPU",
        "config": str(args.config),
        "run": str(args.run),
        "shape": dataclasses.asdict(shape),
        "batch_size": cfg.batch_size,
        "threads": torch.get_num_threads(),
        "steps_timed": args.steps,
        "rounds": args.rounds,
        "ours_tokens_per_s": mine,
        "plain_tokens_per_s": plain,
        "ratio_median": ratio,
        "target_ratio": 0.95,
        "stall_fraction": stalls,
        "stall_fraction_median": statistics.median(stalls),
        "machine": platform.processor() or platform.machine(),
        "torch": torch.__version__,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))
    stall = 100 * result["stall_fraction_median"]
    print(f"ours / plain = {ratio:.3f} (target >= 0.95); stall {stall:.2f}%")
    print(args.out)


if __name__ == "__main__":
    main()
