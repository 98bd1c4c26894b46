"""The `pretrain` and `ablate` commands behind pipeline.cli (argparse there, the work here).

Imports torch only inside the functions, so a missing `torch` extra is one line, not a
traceback.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from pipeline.errors import PipelineError, RecipeError


def _need_torch() -> None:
    try:
        import torch  # noqa: F401
    except ImportError:
        raise PipelineError(
            "pretrain needs torch: pip install -e '.[torch]' (torch==2.13.0)"
        ) from None


def run_pretrain(args: argparse.Namespace) -> str:
    """Train as the recipe says; returns the line to print (the report's path and numbers)."""
    _need_torch()
    from pipeline.train.config import load_pretrain_config
    from pipeline.train.report import format_summary, publish
    from pipeline.train.trainer import REPORT_NAME, pretrain

    cfg = load_pretrain_config(args.config, args.set)
    report = pretrain(
        cfg,
        args.run,
        args.out_dir,
        resume=args.resume,
        force=args.force,
        progress=not args.quiet,
    )
    if report["world_rank"] != 0:
        return ""
    out = Path(args.out_dir) if args.out_dir else Path(report["run_dir"]) / "pretrain"
    if args.out_dir is None:
        publish(Path(report["run_dir"]))  # the pipeline report and report.html show it
    return format_summary(report) + f"\n{out / REPORT_NAME}"


def parse_seeds(text: str | None) -> list[int] | None:
    if text is None:
        return None
    try:
        seeds = [int(s) for s in text.split(",") if s.strip()]
    except ValueError:
        raise RecipeError("--seeds", f"got {text!r}, expected integers like 0,1,2") from None
    if not seeds or any(s < 0 for s in seeds):
        raise RecipeError("--seeds", f"got {text!r}, expected integers >= 0 like 0,1,2")
    return seeds


def run_ablate(args: argparse.Namespace) -> str:
    _need_torch()
    from pipeline.train.ablate import ablate
    from pipeline.train.config import load_pretrain_config

    cfg = load_pretrain_config(args.config, args.set)
    result = ablate(
        cfg,
        [Path(r) for r in args.runs],
        [str(p) for p in args.eval_texts],
        parse_seeds(args.seeds),
        args.out_dir,
        progress=not args.quiet,
    )
    return result["table"] + f"\n{result['json_path']}\n{result['html_path']}"
