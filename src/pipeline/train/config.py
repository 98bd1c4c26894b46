"""The `pretrain:` recipe block: PretrainConfig, validated like a data recipe's stage blocks.

torch-free (recipes are checked, and docgen lists the keys, without the `torch` extra).
seq_len and vocab are not keys: they come from the run's shards and tokenizer.
"""

from __future__ import annotations

import dataclasses
import difflib
from pathlib import Path
from typing import Any, ClassVar, Literal

from pipeline.config import SEED_LIMIT, bounded, build_config, option
from pipeline.errors import RecipeError
from pipeline.recipe import apply_overrides, check_size, read_yaml


@dataclasses.dataclass(frozen=True)
class PretrainConfig:
    RECIPE_SECTION: ClassVar[str] = "pretrain"

    run_dir: str = option("data/demo", "the data run whose shard/ and tokenize/ it reads (--run)")
    # model: a pre-norm GPT; seq_len and vocab come from the shards and the tokenizer
    n_layer: int = bounded(2, ge=1, le=96, doc="transformer blocks")
    n_head: int = bounded(2, ge=1, doc="attention heads; d_model must divide by it")
    d_model: int = bounded(64, ge=8, doc="width (embedding and residual stream)")
    dropout: float = bounded(0.0, ge=0.0, lt=1.0, doc="on attention output, MLP output, embedding")
    # optimiser: AdamW (betas 0.9, 0.95), linear warmup then cosine decay to min_lr
    lr: float = bounded(3e-3, gt=0.0, le=10.0, doc="peak learning rate")
    min_lr: float = bounded(3e-4, ge=0.0, doc="where the cosine decay ends, at the last step")
    warmup_steps: int = bounded(10, ge=0, doc="linear warmup from 0 to lr")
    weight_decay: float = bounded(0.1, ge=0.0, doc="AdamW decay on matrices (not norms, biases)")
    grad_clip: float = bounded(1.0, ge=0.0, doc="max global gradient norm; 0 = no clipping")
    # batch: tokens per optimiser step = batch_size x grad_accum x world size x seq_len
    batch_size: int = bounded(4, ge=1, doc="sequences per micro-batch per rank")
    grad_accum: int = bounded(1, ge=1, doc="micro-batches summed into one optimiser step")
    # budget: one of the two (max_tokens wins when both are set)
    max_steps: int | None = bounded(100, ge=1, doc="optimiser steps")
    max_tokens: int | None = bounded(None, ge=1, doc="or train tokens (rounded up to whole steps)")
    # eval
    eval_every: int = bounded(50, ge=0, doc="steps between shard/eval evaluations; 0 = only at end")
    eval_tokens: int = bounded(65536, ge=1, doc="tokens of shard/eval per evaluation (front first)")
    eval_texts: list[str] = option(factory=list, doc="held-out .jsonl/.txt files: bits per byte")
    save_every: int = bounded(50, ge=0, doc="steps between checkpoints; 0 = only at the end")
    seed: int = bounded(0, ge=0, lt=SEED_LIMIT, doc="model init, dropout and data order")
    order: Literal["auto", "global", "sequential", "shard_block"] = option(
        "global", "sampler order"
    )
    loader_workers: int = bounded(
        0, ge=0, doc="DataLoader worker processes (0: the prefetch thread)"
    )
    device: Literal["auto", "cpu", "cuda"] = option("auto", "auto: cuda when available")
    precision: Literal["auto", "fp32", "bf16"] = option("auto", "auto: bf16 on a GPU that has it")
    compile: bool = option(False, "torch.compile the model (GPU runs; minutes of compile on CPU)")
    threads: int = bounded(1, ge=0, doc="torch CPU threads per process; 0 = torch's default")

    def validate(self, path: str) -> None:
        if self.d_model % self.n_head:
            raise RecipeError(
                f"{path}.n_head", f"d_model {self.d_model} must divide by n_head {self.n_head}"
            )
        if self.min_lr > self.lr:
            raise RecipeError(f"{path}.min_lr", f"must be <= lr {self.lr}, got {self.min_lr}")
        if self.max_steps is None and self.max_tokens is None:
            raise RecipeError(f"{path}.max_steps", "set max_steps or max_tokens (the budget)")
        for i, p in enumerate(self.eval_texts):
            if Path(p).suffix not in (".jsonl", ".txt"):
                raise RecipeError(f"{path}.eval_texts[{i}]", f"expected a .jsonl or .txt, got {p}")

    def tokens_per_step(self, seq_len: int, world_size: int = 1) -> int:
        return self.batch_size * self.grad_accum * world_size * seq_len

    def total_steps(self, seq_len: int, world_size: int = 1) -> int:
        """The budget in optimiser steps: max_tokens rounded up to whole steps, else max_steps."""
        if self.max_tokens is not None:
            return -(-self.max_tokens // self.tokens_per_step(seq_len, world_size))
        assert self.max_steps is not None  # validate() guarantees one of the two
        return self.max_steps


TOP_LEVEL = ("pretrain",)


def build_pretrain(raw: dict[str, Any]) -> PretrainConfig:
    """PretrainConfig from a parsed recipe: a mapping with one `pretrain:` block."""
    for key in raw:
        if key not in TOP_LEVEL:
            close = difflib.get_close_matches(str(key), TOP_LEVEL, n=1, cutoff=0.5)
            raise RecipeError(
                str(key),
                "unknown key in a pretrain recipe (it holds one `pretrain:` block)",
                close[0] if close else None,
            )
    if "pretrain" not in raw:
        raise RecipeError("pretrain", "missing: a pretrain recipe holds one `pretrain:` block")
    return build_config(PretrainConfig, raw["pretrain"], "pretrain")


def load_pretrain_config(path: Path, overrides: list[str] | None = None) -> PretrainConfig:
    """Read and validate a pretrain recipe (YAML, safe_load); `overrides` are `--set` texts
    (`pretrain.max_steps=20`)."""
    raw = apply_overrides(read_yaml(Path(path)), list(overrides or []))
    check_size(raw, "--set")
    return build_pretrain(raw)
