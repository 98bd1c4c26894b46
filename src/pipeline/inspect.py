"""`pipeline inspect`: look at what a stage rejected, and why."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq

from pipeline.errors import PipelineError


def inspect_rejected(run_dir: Path, stage: str, reason: str | None, n: int, chars: int) -> str:
    folder = Path(run_dir) / stage / "rejected"
    parts = sorted(folder.glob("part-*.parquet")) if folder.is_dir() else []
    if not parts:
        raise PipelineError(f"{folder}: no rejected documents (did the stage run?)")
    counts: Counter[str] = Counter()
    shown: list[str] = []
    for part in parts:
        table = pq.read_table(part)
        cols = table.column_names
        for row in table.to_pylist():
            reasons = row.get("reasons") or []
            counts.update(reasons)
            if len(shown) < n and (reason is None or reason in reasons):
                extra = "".join(
                    f"  {c}={row[c]}"
                    for c in cols
                    if c not in ("id", "text", "source", "reasons") and row[c] is not None
                )
                text = row["text"][:chars].replace("\n", "\\n")
                shown.append(f"--- {row['id']}  reasons={','.join(reasons)}{extra}\n{text}")
    if reason is not None and reason not in counts:
        known = ", ".join(f"{k} ({v})" for k, v in counts.most_common())
        raise PipelineError(
            f"no document in {folder} was rejected for '{reason}'; reasons: {known}"
        )
    head = "reasons: " + ", ".join(f"{k}={v}" for k, v in counts.most_common())
    return "\n".join([head, *shown])
