"""`pipeline inspect`: look at what a stage rejected, and why; or one dedup cluster side by side."""

from __future__ import annotations

import difflib
import itertools
import textwrap
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pipeline.errors import DataError, PipelineError


def _read(part: Path) -> pa.Table:
    try:
        return pq.read_table(part)
    except (OSError, pa.ArrowException) as exc:  # pyarrow raises several types for a damaged file
        raise DataError(
            str(part), f"cannot read Parquet part ({exc}); re-run the stage (`pipeline data`)"
        ) from None


def inspect_rejected(run_dir: Path, stage: str, reason: str | None, n: int, chars: int) -> str:
    folder = Path(run_dir) / stage / "rejected"
    parts = sorted(folder.glob("part-*.parquet")) if folder.is_dir() else []
    if not parts:
        raise PipelineError(f"{folder}: no rejected documents (did the stage run?)")
    counts: Counter[str] = Counter()
    shown: list[str] = []
    for part in parts:
        table = _read(part)
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


def _marked(base: list[str], other: list[str]) -> str:
    """`other` with the words that differ from `base` wrapped in [brackets]."""
    out: list[str] = []
    sm = difflib.SequenceMatcher(a=base, b=other, autojunk=False)
    for op, _, _, j1, j2 in sm.get_opcodes():
        words = other[j1:j2]
        out += words if op == "equal" else [f"[{w}]" for w in words]
    return " ".join(out)


def inspect_cluster(run_dir: Path, stage: str, cluster: int, chars: int, width: int = 60) -> str:
    """Members of one dedup cluster side by side: the kept document, then each removed one,
    with the words that differ from the kept one in [brackets]."""
    folder = Path(run_dir) / stage
    parts = sorted(folder.glob("part-*.parquet")) + sorted(folder.glob("rejected/part-*.parquet"))
    rows = []
    for part in parts:
        table = _read(part)
        if "cluster" not in table.column_names:
            raise PipelineError(f"{part}: no `cluster` column (is {stage} a dedup stage?)")
        if "text" not in table.column_names:  # tokenize keeps `cluster` but not the text
            raise PipelineError(
                f"{part}: no `text` column: {stage} keeps no document text; "
                "inspect the dedup stage's clusters (--stage dedup)"
            )
        hit = table.filter(pc.equal(table["cluster"], cluster)).to_pylist()
        rows += hit
    if not rows:
        raise PipelineError(f"no document of {folder} is in cluster {cluster}")
    rows.sort(key=lambda r: bool(r.get("reasons")))  # the kept one first
    base = rows[0]["text"][:chars].split()
    cols = []
    for i, r in enumerate(rows):
        words = r["text"][:chars].split()
        body = " ".join(words) if i == 0 else _marked(base, words)
        tag = ",".join(r.get("reasons") or ["kept"])
        cols.append([f"{r['id']} ({tag})", "-" * width, *textwrap.wrap(body, width)])
    lines = [f"cluster {cluster}: {len(rows)} documents"]
    for k in range(1, len(cols)):  # kept | removed, one block per removed document
        pair = (cols[0], cols[k])
        for a, b in itertools.zip_longest(*pair, fillvalue=""):
            lines.append(f"{a:<{width}} | {b}")
        lines.append("")
    if len(cols) == 1:
        lines += cols[0]
    return "\n".join(lines).rstrip()
