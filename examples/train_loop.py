"""Train a tiny causal LM on a run's shards, checkpoint model + loader state, stop, resume (also
on another simulated world size) and show, step by step, that the resumed run sees exactly the
batches of the uninterrupted one.

    python examples/train_loop.py data/demo/shard/train --steps 12 --stop-at 5 \\
        --world-size 2 --resume-world-size 4

Ranks are simulated in one process: each rank has its own TokenLoader (with DataLoader workers)
and the model trains on the global batch, as DDP's averaged gradients would. The global batch
is assembled in global position order (rank r's k-th sample at offset r + kP), so it, and the
loss, do not depend on the world size. Fingerprint of a step: sha256 of its global sample ids.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from pipeline.errors import PipelineError
from pipeline.loader import GlobalSampler, ShardedTokenDataset, TokenLoader, make_doc_mask


class TinyLM(nn.Module):
    """Embedding -> one pre-norm attention block (packed documents kept apart) -> LM head."""

    def __init__(self, vocab: int, dim: int = 32, heads: int = 2):
        super().__init__()
        self.heads = heads
        self.emb = nn.Embedding(vocab, dim)
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))
        self.head = nn.Linear(dim, vocab)

    def forward(self, ids: torch.Tensor, seg: torch.Tensor) -> torch.Tensor:
        b, length = ids.shape
        x = self.emb(ids)
        q, k, v = self.qkv(self.norm1(x)).view(b, length, 3, self.heads, -1).unbind(2)
        mask = make_doc_mask(seg).unsqueeze(1)  # [B, 1, L, L]: causal, within each document
        att = F.scaled_dot_product_attention(
            q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), attn_mask=mask
        )
        x = x + self.proj(att.transpose(1, 2).reshape(b, length, -1))
        return self.head(x + self.mlp(self.norm2(x)))


def lm_loss(model: TinyLM, ids: torch.Tensor, seg: torch.Tensor) -> torch.Tensor:
    """Next-token loss; no target across a document boundary or on padding (segment 0)."""
    logits = model(ids, seg)[:, :-1]
    keep = (seg[:, 1:] == seg[:, :-1]) & (seg[:, 1:] > 0)
    target = ids[:, 1:].masked_fill(~keep, -100)
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), target.reshape(-1))


def global_batches(
    ds: ShardedTokenDataset, args: argparse.Namespace, world: int, state: dict | None
) -> Iterator[tuple[int, dict[str, torch.Tensor], list[TokenLoader]]]:
    """(epoch, global batch, rank loaders) forever, epoch after epoch, from `state` if given."""
    per_rank = args.global_batch // world
    loaders = [
        TokenLoader(
            ds,
            GlobalSampler(ds, per_rank, seed=args.seed, world_size=world, rank=r, drop_last=True),
            num_workers=args.workers,
        )
        for r in range(world)
    ]
    epoch = 0
    if state is not None:
        for lo in loaders:
            lo.load_state_dict(state)
        epoch = state["epoch"]
    while True:
        for lo in loaders:
            lo.set_epoch(epoch)  # keeps a resumed cursor; a new epoch starts from 0
        for parts in zip(*loaders, strict=True):  # ranks always get as many steps
            out = {}
            for key in ("input_ids", "segment_ids"):
                t = torch.empty(args.global_batch, ds.seq_len, dtype=torch.int64)
                for r, part in enumerate(parts):
                    t[r::world] = part[key]  # global position order, whatever the world size
                out[key] = t
            yield epoch, out, loaders
        epoch += 1


def fingerprint(ids: torch.Tensor) -> str:
    return hashlib.sha256(ids.numpy().tobytes()).hexdigest()[:16]


def train(
    ds, args, world: int, steps: range, ckpt: Path | None = None, stop_at: int | None = None
) -> list[tuple[int, str, float]]:
    """Train over `steps`; at `stop_at` save model + loader state to `ckpt` and
    stop. Starts from `ckpt` when steps.start > 0. Returns (step, fingerprint, loss)."""
    torch.manual_seed(args.seed)
    model = TinyLM(args.vocab or int(ds.metadata.get("vocab_size") or 65536))
    state = None
    if steps.start > 0:
        saved = torch.load(ckpt, weights_only=True)
        model.load_state_dict(saved["model"])
        state = json.loads(saved["loader"])
        assert saved["step"] == steps.start
    log = []
    batches = global_batches(ds, args, world, state)
    for step in steps:
        _, batch, loaders = next(batches)
        loss = lm_loss(model, batch["input_ids"], batch["segment_ids"])
        model.zero_grad()
        loss.backward()
        with torch.no_grad():  # plain SGD; with torch.optim, checkpoint its state_dict too
            for w in model.parameters():
                w -= args.lr * w.grad
        log.append((step, fingerprint(batch["input_ids"]), round(loss.item(), 6)))
        if stop_at is not None and step + 1 == stop_at:
            loader_state = loaders[0].state_dict()  # the same on every rank
            assert all(lo.state_dict() == loader_state for lo in loaders)
            blob = {
                "model": model.state_dict(),
                "loader": json.dumps(loader_state),
                "step": stop_at,
            }
            tmp = ckpt.with_name(ckpt.name + ".tmp")
            torch.save(blob, tmp)
            os.replace(tmp, ckpt)  # atomic: a crash never leaves half a checkpoint
            break
    return log


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("shards", help="a shard folder, e.g. data/demo/shard/train")
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--stop-at", type=int, default=5)
    p.add_argument("--global-batch", type=int, default=8)
    p.add_argument("--world-size", type=int, default=2)
    p.add_argument("--resume-world-size", type=int, default=4)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--lr", type=float, default=0.5)
    p.add_argument("--vocab", type=int, default=None, help="default: metadata's vocab_size")
    p.add_argument("--ckpt", default=None, help="checkpoint file (default: in the temp folder)")
    args = p.parse_args(argv)
    torch.set_num_threads(1)  # a tiny model: more threads only add synchronisation
    for w in (args.world_size, args.resume_world_size):
        if args.global_batch % w:
            p.error(f"--global-batch {args.global_batch} is not divisible by world size {w}")
    ds = ShardedTokenDataset(args.shards)
    ckpt = Path(args.ckpt or Path(tempfile.gettempdir()) / "pipeline_train_loop.ckpt")
    full = train(ds, args, args.world_size, range(args.steps))
    head = train(ds, args, args.world_size, range(args.steps), ckpt, stop_at=args.stop_at)
    tail = train(ds, args, args.resume_world_size, range(args.stop_at, args.steps), ckpt)
    resumed = head + tail
    print(
        f"step  uninterrupted (P={args.world_size})    resumed (P={args.world_size} -> "
        f"{args.resume_world_size} at step {args.stop_at})   loss"
    )
    for (step, f1, l1), (_, f2, l2) in zip(full, resumed, strict=True):
        mark = "ok" if (f1, l1) == (f2, l2) else "DIFFERENT"
        print(f"{step:4d}  {f1}  {l1:.6f}    {f2}  {l2:.6f}  {mark}")
    same = [(f, loss) for _, f, loss in full] == [(f, loss) for _, f, loss in resumed]
    print(f"resumed == uninterrupted: {same}")
    return {"full": full, "resumed": resumed, "same": same}


if __name__ == "__main__":
    try:
        sys.exit(0 if main()["same"] else 1)
    except PipelineError as exc:  # a bad shard folder: one line, no traceback
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(1)
