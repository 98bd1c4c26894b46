"""Evaluation: loss and perplexity on shard/eval, bits per byte on held-out raw texts.

Bits per byte of a text set = Σ nats of its tokens / ln 2 / Σ UTF-8 bytes of its texts, each
text tokenized with the run's own tokenizer. Per-token loss cannot compare two runs whose
tokenizers differ; per byte it can. A text is scored like lm-eval-harness's rolling
loglikelihood: EOS as the first context token, then every token of the text predicted, in
disjoint windows of seq_len predictions (each window restarts its context).
"""

from __future__ import annotations

import math
from contextlib import AbstractContextManager
from typing import Any

import numpy as np
import torch
from torch import nn

from pipeline.loader import ShardedTokenDataset
from pipeline.tokenizer import Tokenizer
from pipeline.train.model import loss_sum


@torch.no_grad()
def eval_shards(
    model: nn.Module,
    ds: ShardedTokenDataset,
    eval_tokens: int,
    batch_size: int,
    device: torch.device,
    autocast: AbstractContextManager,
) -> dict[str, Any]:
    """Loss (nats/token) and perplexity on the first ⌈eval_tokens / seq_len⌉ sequences."""
    n = min(len(ds), max(1, -(-eval_tokens // ds.seq_len)))
    was_training = model.training
    model.eval()
    nats, count = 0.0, 0
    for start in range(0, n, batch_size):
        batch = ds.get_batch(np.arange(start, min(n, start + batch_size)))
        ids = torch.from_numpy(batch["input_ids"].astype(np.int64)).to(device)
        seg = torch.from_numpy(batch["segment_ids"].astype(np.int64)).to(device)
        with autocast:
            s, c = loss_sum(model, ids, seg)
        nats += float(s)
        count += int(c)
    model.train(was_training)
    loss = nats / max(count, 1)
    return {
        "loss": loss,
        "perplexity": math.exp(min(loss, 700.0)),
        "sequences": n,
        "tokens": count,
    }


def text_windows(ids: list[int], eos_id: int, seq_len: int) -> list[tuple[list[int], list[int]]]:
    """(inputs, targets) windows scoring every id of one text: inputs [EOS, ids...] shifted by
    one, cut into disjoint pieces of at most seq_len predictions."""
    seq = [eos_id, *ids]
    out = []
    for s in range(0, len(ids), seq_len):
        target = seq[s + 1 : s + 1 + seq_len]
        out.append((seq[s : s + len(target)], target))
    return out


@torch.no_grad()
def bits_per_byte(
    model: nn.Module,
    texts: list[str],
    tokenizer: Tokenizer,
    seq_len: int,
    batch_size: int,
    device: torch.device,
    autocast: AbstractContextManager,
) -> dict[str, Any]:
    """{bpb, nats, bytes, tokens, texts, bytes_per_token} of one eval set."""
    was_training = model.training
    model.eval()
    windows: list[tuple[list[int], list[int]]] = []
    num_bytes = 0
    for text, ids in zip(texts, tokenizer.encode_batch(texts), strict=True):
        num_bytes += len(text.encode("utf-8"))  # what the tokens spell, EOS aside
        windows += text_windows(ids, tokenizer.eos_id, seq_len)
    nats, tokens = 0.0, 0
    windows.sort(key=lambda w: len(w[0]))  # similar lengths together: little padding
    for start in range(0, len(windows), batch_size):
        group = windows[start : start + batch_size]
        width = max(len(x) for x, _ in group)
        ids = torch.zeros(len(group), width, dtype=torch.int64)
        seg = torch.zeros(len(group), width, dtype=torch.int64)
        tgt = torch.full((len(group), width), -100, dtype=torch.int64)
        for i, (x, y) in enumerate(group):
            ids[i, : len(x)] = torch.tensor(x)
            seg[i, : len(x)] = 1
            tgt[i, : len(y)] = torch.tensor(y)
        ids, seg, tgt = ids.to(device), seg.to(device), tgt.to(device)
        with autocast:
            logits = model(ids, seg)
        nats += float(
            nn.functional.cross_entropy(
                logits.float().reshape(-1, logits.shape[-1]), tgt.reshape(-1), reduction="sum"
            )
        )
        tokens += int((tgt >= 0).sum())
    model.train(was_training)
    return {
        "bpb": nats / math.log(2) / max(num_bytes, 1),
        "nats": nats,
        "bytes": num_bytes,
        "tokens": tokens,
        "texts": len(texts),
        "bytes_per_token": num_bytes / max(tokens, 1),
    }
