"""pretrain: train the proxy GPT on a data run's shards; checkpoints, eval, report.json.

One optimiser step = grad_accum micro-batches per rank. Its loss is the summed nats of every
target token of the step (all micro-batches, all ranks) over their global count, so the loss
and the gradient are the same whatever the split into ranks and micro-batches (up to float
addition order). Under torchrun (WORLD_SIZE > 1) the model is wrapped in DDP and each rank
reads its part of every global step from the same GlobalSampler cursor.
Outputs in `<out_dir>` (default `<run>/pretrain/`): checkpoint.pt and report.json.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import math
import os
import resource
import sys
import time
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from pipeline.errors import PipelineError
from pipeline.io import atomic_write_json
from pipeline.train.checkpoint import (
    CHECKPOINT_NAME,
    check_compatible,
    load_checkpoint,
    rng_state,
    save_checkpoint,
    set_rng_state,
)
from pipeline.train.config import PretrainConfig
from pipeline.train.data import RunData, TrainStream, read_eval_texts
from pipeline.train.evaluate import bits_per_byte, eval_shards
from pipeline.train.model import GPT, ModelShape, flops_per_token, loss_sum, target_mask

log = logging.getLogger("pipeline")
REPORT_NAME = "report.json"
# dense bf16 tensor-core peaks (FLOP/s) for MFU; a GPU not listed gets no MFU
PEAK_FLOPS = {
    "H200": 989e12, "H100": 989e12, "A100": 312e12, "L40S": 362e12, "L4": 121e12,
    "A10": 125e12, "RTX 4090": 165e12, "RTX 3090": 71e12, "RTX 3060": 51e12, "V100": 125e12,
}  # fmt: skip


@dataclasses.dataclass
class Dist:
    """This process's place in a torchrun job (world_size 1 when run alone)."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    started: bool = False  # we called init_process_group (and so tear it down)

    @property
    def main(self) -> bool:
        return self.rank == 0


def setup_dist(device_kind: str) -> Dist:
    """From torchrun's RANK / WORLD_SIZE / LOCAL_RANK; gloo on CPU, nccl on CUDA."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return Dist()
    d = Dist(int(os.environ["RANK"]), world, int(os.environ.get("LOCAL_RANK", "0")))
    if device_kind == "cuda":  # before NCCL starts: each rank on its own GPU
        torch.cuda.set_device(d.local_rank % torch.cuda.device_count())
    if not dist.is_initialized():
        dist.init_process_group("nccl" if device_kind == "cuda" else "gloo")
        d.started = True
    return d


def resolve_device(cfg: PretrainConfig, d: Dist) -> torch.device:
    want = cfg.device
    if want == "auto":
        want = "cuda" if torch.cuda.is_available() else "cpu"
    if want == "cuda":
        if not torch.cuda.is_available():
            raise PipelineError("pretrain.device: cuda asked for, but torch sees no CUDA GPU")
        dev = torch.device("cuda", d.local_rank % torch.cuda.device_count())
        torch.cuda.set_device(dev)  # NCCL collectives and barrier() use the current device
        return dev
    return torch.device("cpu")


def autocast_for(cfg: PretrainConfig, device: torch.device) -> tuple[str, Any]:
    """(precision name, a context factory): bf16 autocast, or plain fp32."""
    prec = cfg.precision
    if prec == "auto":
        bf16_gpu = device.type == "cuda" and torch.cuda.is_bf16_supported()
        prec = "bf16" if bf16_gpu else "fp32"
    if prec == "bf16":
        return prec, lambda: torch.autocast(device.type, dtype=torch.bfloat16)
    return prec, contextlib.nullcontext


def lr_at(cfg: PretrainConfig, total: int):
    """Multiplier of lr at optimiser step s: linear warmup, then cosine down to min_lr."""
    floor = cfg.min_lr / cfg.lr

    def factor(s: int) -> float:
        if s < cfg.warmup_steps:
            return (s + 1) / (cfg.warmup_steps + 1)
        span = max(total - cfg.warmup_steps, 1)
        t = min((s - cfg.warmup_steps) / span, 1.0)
        return floor + (1.0 - floor) * 0.5 * (1.0 + math.cos(math.pi * t))

    return factor


def make_optimizer(model: torch.nn.Module, cfg: PretrainConfig, device: torch.device):
    """AdamW; weight decay on matrices only (not norms, biases)."""
    decay = [p for p in model.parameters() if p.dim() >= 2]
    other = [p for p in model.parameters() if p.dim() < 2]
    groups = [
        {"params": decay, "weight_decay": cfg.weight_decay},
        {"params": other, "weight_decay": 0.0},
    ]
    extra = {"fused": True} if device.type == "cuda" else {}
    return torch.optim.AdamW(groups, lr=cfg.lr, betas=(0.9, 0.95), eps=1e-8, **extra)


def peak_memory_bytes(device: torch.device) -> int:
    if device.type == "cuda":
        return int(torch.cuda.max_memory_allocated(device))
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024  # Linux: KiB


def gpu_peak_flops(device: torch.device) -> float | None:
    if device.type != "cuda":
        return None
    name = torch.cuda.get_device_name(device)
    return next((v for k, v in PEAK_FLOPS.items() if k in name), None)


class _Bar:
    """One stderr line: step, loss, tokens/s (only on a terminal, only rank 0, not with -q)."""

    def __init__(self, total: int, enabled: bool):
        self.total, self.enabled = total, enabled and sys.stderr.isatty()
        self._last = 0.0

    def show(self, step: int, loss: float, tok_s: float, force: bool = False) -> None:
        now = time.perf_counter()
        if self.enabled and (force or now - self._last > 0.2):
            self._last = now
            sys.stderr.write(
                f"\r  pretrain: step {step}/{self.total} loss {loss:.4f} {tok_s:,.0f} tok/s   "
            )
            sys.stderr.flush()

    def close(self) -> None:
        if self.enabled:
            sys.stderr.write("\n")
            sys.stderr.flush()


class NonFiniteLoss(PipelineError):
    pass


class Trainer:
    """State of one pretrain run; `run()` trains to the budget and returns the report dict."""

    def __init__(
        self,
        cfg: PretrainConfig,
        run_dir: str | Path | None = None,
        out_dir: str | Path | None = None,
        *,
        resume: bool = False,
        force: bool = False,
        progress: bool = True,
    ):
        self.cfg = cfg
        if cfg.threads:
            torch.set_num_threads(cfg.threads)
        want = (
            "cuda"
            if cfg.device == "cuda" or (cfg.device == "auto" and torch.cuda.is_available())
            else "cpu"
        )
        self.dist = setup_dist(want)
        self.device = resolve_device(cfg, self.dist)
        self.precision, self.autocast = autocast_for(cfg, self.device)
        self.data = RunData(run_dir if run_dir is not None else cfg.run_dir)
        self.eval_sets = {str(p): read_eval_texts(p) for p in cfg.eval_texts}  # fail up front
        if self.eval_sets:
            self.data.load_tokenizer()
        self.out_dir = Path(out_dir) if out_dir is not None else self.data.run_dir / "pretrain"
        self.ckpt_path = self.out_dir / CHECKPOINT_NAME
        self.progress = progress
        self.shape = ModelShape(
            self.data.vocab_size, self.data.seq_len, cfg.n_layer, cfg.n_head, cfg.d_model
        )
        self.total = cfg.total_steps(self.data.seq_len, self.dist.world_size)
        self.tokens_per_step = cfg.tokens_per_step(self.data.seq_len, self.dist.world_size)
        blob = self._resume_blob(resume, force)
        self._build(blob)

    # ------------------------------------------------------------ setup

    def _resume_blob(self, resume: bool, force: bool) -> dict[str, Any] | None:
        if not resume:
            if self.ckpt_path.exists() and not force:
                raise PipelineError(
                    f"{self.ckpt_path} exists: pass --resume to continue it, or --force to "
                    "train from scratch over it"
                )
            return None
        blob = load_checkpoint(self.ckpt_path)
        check_compatible(self.ckpt_path, blob, self.shape.to_dict(), self.data.fingerprint())
        if blob["world_tokens_per_step"] != self.tokens_per_step:
            log.warning(
                "resume: %d tokens per step now, %d in the checkpoint (batch_size, grad_accum "
                "or world size changed): the data order continues, the steps differ",
                self.tokens_per_step,
                blob["world_tokens_per_step"],
            )
        return blob

    def _build(self, blob: dict[str, Any] | None) -> None:
        cfg = self.cfg
        torch.manual_seed(cfg.seed)
        self.model = GPT(self.shape, cfg.dropout).to(self.device)
        self.optimizer = make_optimizer(self.model, cfg, self.device)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, lr_at(cfg, self.total))
        self.step, self.losses, self.evals = 0, [], []
        self.target_tokens = 0
        loader_state = None
        if blob is not None:
            self.model.load_state_dict(blob["model"])
            self.optimizer.load_state_dict(blob["optimizer"])
            self.scheduler.load_state_dict(blob["scheduler"])
            set_rng_state(blob["rng"])
            self.step, self.losses = int(blob["step"]), list(blob["losses"])
            self.evals, self.target_tokens = list(blob["evals"]), int(blob["target_tokens"])
            loader_state = dict(blob["loader"])
        self.stream = TrainStream(
            self.data.train,
            cfg.batch_size,
            seed=cfg.seed,
            world_size=self.dist.world_size,
            rank=self.dist.rank,
            order=cfg.order,
            device=self.device,
            workers=cfg.loader_workers,
            state=loader_state,
        )
        self.net: torch.nn.Module = self.model
        if self.dist.world_size > 1:
            from torch.nn.parallel import DistributedDataParallel as DDP

            ids = [self.device.index] if self.device.type == "cuda" else None
            self.net = DDP(self.model, device_ids=ids)
        if cfg.compile:
            self.net = torch.compile(self.net)

    # ------------------------------------------------------------ one step

    def _all_sum(self, t: torch.Tensor) -> torch.Tensor:
        if self.dist.world_size > 1:
            dist.all_reduce(t)
        return t

    def train_step(self) -> float:
        """One optimiser step; returns its loss (nats per target token, all ranks)."""
        batches = [self.stream.next_batch() for _ in range(self.cfg.grad_accum)]
        local = sum(int(target_mask(b["segment_ids"]).sum()) for b in batches)
        count = self._all_sum(torch.tensor(float(local), device=self.device))
        scale = self.dist.world_size / count.clamp(min=1.0)  # DDP averages over ranks
        total = torch.zeros((), device=self.device)
        for i, b in enumerate(batches):
            sync = i == len(batches) - 1 or self.dist.world_size == 1
            ctx = contextlib.nullcontext() if sync else self.net.no_sync()
            with ctx:
                with self.autocast():
                    nats, _ = loss_sum(self.net, b["input_ids"], b["segment_ids"])
                (nats * scale).backward()
            total += nats.detach()
        loss = float(self._all_sum(total) / count.clamp(min=1.0))
        if not math.isfinite(loss):
            self.optimizer.zero_grad(set_to_none=True)
            raise NonFiniteLoss(self._nonfinite_message(loss))
        if self.cfg.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.cfg.grad_clip)
        self.optimizer.step()
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.target_tokens += int(count)
        return loss

    def _nonfinite_message(self, loss: float) -> str:
        kept = (
            f"the last good checkpoint ({self.ckpt_path}, step {self._saved_step}) is kept"
            if self._saved_step is not None
            else "no checkpoint was written yet"
        )
        return (
            f"pretrain: loss is {loss} at step {self.step + 1}: stopped before the update; "
            f"{kept}; lower pretrain.lr, set pretrain.grad_clip, or try precision: fp32"
        )

    # ------------------------------------------------------------ eval, save

    def evaluate(self) -> dict[str, Any]:
        """shard/eval loss + perplexity and BPB per eval text set, at the current step."""
        out: dict[str, Any] = {"step": self.step}
        bs = self.cfg.batch_size
        if self.data.eval is not None:
            out["shard_eval"] = eval_shards(
                self.model,
                self.data.eval,
                self.cfg.eval_tokens,
                bs,
                self.device,
                self.autocast(),
            )
        out["texts"] = {
            name: bits_per_byte(
                self.model,
                texts,
                self.data.load_tokenizer(),
                self.data.seq_len,
                bs,
                self.device,
                self.autocast(),
            )
            for name, texts in self.eval_sets.items()
        }
        return out

    def save(self) -> None:
        if self.dist.main:
            save_checkpoint(
                self.ckpt_path,
                {
                    "step": self.step,
                    "model": self.model.state_dict(),
                    "optimizer": self.optimizer.state_dict(),
                    "scheduler": self.scheduler.state_dict(),
                    "loader": self.stream.state,
                    "rng": rng_state(),
                    "shape": self.shape.to_dict(),
                    "data": self.data.fingerprint(),
                    "config": dataclasses.asdict(self.cfg),
                    "losses": list(self.losses),
                    "evals": list(self.evals),
                    "target_tokens": self.target_tokens,
                    "world_tokens_per_step": self.tokens_per_step,
                },
            )
        self._saved_step = self.step
        if self.dist.world_size > 1:
            dist.barrier()

    # ------------------------------------------------------------ the loop

    def run(self, stop_at: int | None = None) -> dict[str, Any]:
        """Train to the budget (or to step `stop_at`, checkpointing there: a planned stop);
        evaluate, checkpoint, write report.json; returns the report."""
        cfg, start = self.cfg, self.step
        self._saved_step = start if start else None
        end = self.total if stop_at is None else min(stop_at, self.total)
        bar = _Bar(self.total, self.progress and self.dist.main)
        train_s, t_tokens = 0.0, 0
        try:
            while self.step < end:
                t0 = time.perf_counter()
                try:
                    loss = self.train_step()
                except torch.OutOfMemoryError:
                    raise PipelineError(self._oom_message()) from None
                train_s += time.perf_counter() - t0
                t_tokens += self.tokens_per_step
                self.step += 1
                self.losses.append(loss)
                bar.show(self.step, loss, t_tokens / max(train_s, 1e-9))
                if cfg.eval_every and self.step % cfg.eval_every == 0 and self.step < self.total:
                    self._eval_now()
                if cfg.save_every and self.step % cfg.save_every == 0 and self.step < end:
                    self.save()
            bar.close()
            stall = self.stream.stats()
        finally:
            self.stream.close()
        if self.step >= self.total and (not self.evals or self.evals[-1]["step"] != self.step):
            self._eval_now()
        self.save()
        report = self.report(train_s, t_tokens, stall)
        if self.dist.main:
            atomic_write_json(self.out_dir / REPORT_NAME, report)
        return report

    def _eval_now(self) -> None:
        if self.dist.main:
            ev = self.evaluate()
            self.evals.append(ev)
            shard = ev.get("shard_eval") or {}
            texts = " ".join(f"{Path(k).name} {v['bpb']:.4f} bpb" for k, v in ev["texts"].items())
            log.info(
                "pretrain: step %d eval loss %s %s",
                self.step,
                f"{shard['loss']:.4f}" if shard else "-",
                texts,
            )
        if self.dist.world_size > 1:
            dist.barrier()

    def _oom_message(self) -> str:
        c = self.cfg
        return (
            f"pretrain: {self.device} out of memory at step {self.step + 1} (batch_size "
            f"{c.batch_size} x seq_len {self.data.seq_len}): lower pretrain.batch_size and "
            f"raise pretrain.grad_accum to keep the tokens per step (e.g. batch_size "
            f"{max(1, c.batch_size // 2)}, grad_accum {c.grad_accum * 2})"
        )

    def report(self, train_s: float, t_tokens: int, stall: dict[str, Any]) -> dict[str, Any]:
        tok_s = t_tokens / train_s if train_s > 0 else 0.0
        n_params = self.model.num_params()
        peak = gpu_peak_flops(self.device)
        mfu = flops_per_token(self.shape, n_params) * tok_s / peak if peak else None
        final = self.evals[-1] if self.evals else {}
        return {
            "run_dir": str(self.data.run_dir),
            "config": dataclasses.asdict(self.cfg),
            "shape": self.shape.to_dict(),
            "num_params": n_params,
            "world_size": self.dist.world_size,
            "world_rank": self.dist.rank,
            "device": str(self.device),
            "device_name": torch.cuda.get_device_name(self.device)
            if self.device.type == "cuda"
            else "cpu",
            "precision": self.precision,
            "steps": self.step,
            "tokens": self.step * self.tokens_per_step,
            "target_tokens": self.target_tokens,
            "tokens_per_step": self.tokens_per_step,
            "losses": self.losses,
            "evals": self.evals,
            "final": final,
            "tokens_per_s": tok_s,
            "train_seconds": train_s,
            "peak_memory_bytes": peak_memory_bytes(self.device),
            "mfu": mfu,
            "stall_fraction": stall.get("stall_fraction"),
            "data": self.data.fingerprint(),
        }


def pretrain(
    cfg: PretrainConfig,
    run_dir: str | Path | None = None,
    out_dir: str | Path | None = None,
    *,
    resume: bool = False,
    force: bool = False,
    progress: bool = True,
    stop_at: int | None = None,
) -> dict[str, Any]:
    """Train the proxy on `run_dir` (default cfg.run_dir) into `out_dir` (default
    `<run>/pretrain`); returns report.json's dict. Under torchrun every rank calls it."""
    trainer = Trainer(cfg, run_dir, out_dir, resume=resume, force=force, progress=progress)
    try:
        return trainer.run(stop_at)
    finally:
        if trainer.dist.started:
            dist.destroy_process_group()
