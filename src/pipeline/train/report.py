"""What a pretrain run prints, and how it reaches the run's pipeline_report.json / report.html.

The report section itself is built by pipeline.report from `<run>/pretrain/report.json` (the
report is derived data, rebuilt from the manifest); publish() only triggers that rebuild.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

log = logging.getLogger("pipeline")


def format_summary(report: dict[str, Any]) -> str:
    """A few lines: loss first -> last, eval loss / ppl, BPB per set, tokens/s, memory."""
    losses = report.get("losses") or [float("nan")]
    final = report.get("final") or {}
    lines = [
        f"pretrain: {report['steps']} steps, {report['tokens']:,} tokens, "
        f"{report['num_params']:,} params on {report['device']} ({report['precision']}, "
        f"world {report['world_size']})",
        f"  train loss {losses[0]:.4f} -> {losses[-1]:.4f}",
    ]
    shard = final.get("shard_eval")
    if shard:
        lines.append(
            f"  eval loss {shard['loss']:.4f}  ppl {shard['perplexity']:.2f}  "
            f"({shard['tokens']:,} tokens of shard/eval)"
        )
    for name, ev in (final.get("texts") or {}).items():
        lines.append(f"  {name}: {ev['bpb']:.4f} bits/byte ({ev['bytes']:,} bytes)")
    mfu = report.get("mfu")
    lines.append(
        f"  {report['tokens_per_s']:,.0f} tokens/s, peak memory "
        f"{report['peak_memory_bytes'] / 2**20:,.0f} MiB"
        + (f", MFU {100 * mfu:.1f}%" if mfu is not None else "")
        + f", loader stall {100 * (report.get('stall_fraction') or 0):.1f}%"
    )
    return "\n".join(lines)


def publish(run_dir: Path) -> None:
    """Rebuild the run's pipeline_report.json and report.html so they show the pretrain
    section; a run folder without a manifest (or read-only) keeps its files, with a warning."""
    from pipeline.manifest import MANIFEST_NAME, Manifest
    from pipeline.report import sync_report
    from pipeline.report.html import write_html

    if not (run_dir / MANIFEST_NAME).is_file():
        log.warning("%s has no %s: pipeline_report.json not updated", run_dir, MANIFEST_NAME)
        return
    try:
        sync_report(Manifest.load(run_dir))
        write_html(run_dir)
    except OSError as exc:
        log.warning("could not update %s's report (%s)", run_dir, exc.strerror or exc)
