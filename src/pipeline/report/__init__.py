"""pipeline_report.json: {recipe, seed, stages: [{stage, seconds, stats}]}, and its table view.

The report is derived data: each section is stored in manifest.json with the stage's commit, and
the report is rebuilt from the manifest after every commit and at the start of every run, so a
crash between the two writes, a deleted or a damaged report costs nothing but a rebuild.
A setting echoed in the stats carries its recipe key beside it (`threshold` and
`threshold_key: quality.min_score`; a histogram or rule row has `key`); the table shows the key
next to the value. report.html draws the same dict; report.compare puts two side by side.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from pipeline.errors import DataError, PipelineError
from pipeline.io import atomic_write_bytes, json_text
from pipeline.report.schema import check_report, report_problem  # noqa: F401 (its home)
from pipeline.text_files import read_json_file

REPORT_NAME = "pipeline_report.json"
REPORT_LEVELS = 4  # indented down to each stat of each stage; a stat's value on one line
log = logging.getLogger("pipeline")


def load_report(run_dir: Path) -> dict[str, Any]:
    """The report of `run_dir`: rebuilt from its manifest when there is one, else read as is."""
    from pipeline.manifest import MANIFEST_NAME, Manifest

    if (Path(run_dir) / MANIFEST_NAME).is_file():
        report = sync_report(Manifest.load(run_dir), write=False)
        return check_report(report, str(Path(run_dir) / MANIFEST_NAME))
    return read_report(run_dir)


def read_report(run_dir: Path) -> dict[str, Any]:
    """pipeline_report.json as written; DataError if it is not a report."""
    path = Path(run_dir) / REPORT_NAME
    if not path.exists():
        return {"recipe": None, "seed": None, "stages": []}
    return check_report(read_json_file(path, "report"), str(path))


def read_run_report(run_dir: Path) -> dict[str, Any]:
    """The report of a run for `pipeline report`: rebuilt from its manifest (and saved, unless
    the folder is read-only), else the file as is; a folder with neither is a user error."""
    from pipeline.manifest import MANIFEST_NAME, Manifest

    run_dir = Path(run_dir)
    if (run_dir / MANIFEST_NAME).is_file():  # the report is derived from it: rebuild if needed
        manifest = Manifest.load(run_dir)
        try:
            report = sync_report(manifest)
        except OSError:  # a read-only run folder: the rebuilt report, not saved
            report = sync_report(manifest, write=False)
        # the sections come from manifest.json: a hand-edited one is named
        return check_report(report, str(run_dir / MANIFEST_NAME))
    if (run_dir / REPORT_NAME).exists():
        return read_report(run_dir)
    raise PipelineError(f"{run_dir}: no {REPORT_NAME}; run `pipeline data` first")


def build_report(manifest: Any, order: list[str], old: dict[str, Any] | None = None) -> dict:
    """The report the manifest describes, stages in pipeline order. A manifest written before
    sections were stored in it takes that stage's section from the `old` report."""
    old_sections = {s["stage"]: s for s in (old or {}).get("stages", [])}
    sections = []
    for name, entry in manifest.stages.items():
        section = entry.get("report")
        if isinstance(section, dict):
            sections.append({"stage": name, **section})
        elif name in old_sections:
            sections.append(old_sections[name])
    rank = {name: i for i, name in enumerate(order)}
    sections.sort(key=lambda s: rank.get(s["stage"], len(rank)))
    trained = pretrain_section(manifest.run_dir)
    if trained is not None:
        sections.append(trained)
    info = manifest.report or {}
    recipe = info.get("recipe", (old or {}).get("recipe"))
    seed = info.get("seed", (old or {}).get("seed"))
    return {"recipe": recipe, "seed": seed, "stages": sections}


PRETRAIN_REPORT = "pretrain/report.json"  # written by `pipeline pretrain` (pipeline.train)
CURVE_POINTS = 200  # the loss curve in the report, evenly thinned to at most this many steps


def pretrain_section(run_dir: Path) -> dict[str, Any] | None:
    """The `pretrain` section, from `<run>/pretrain/report.json` when there is one: loss
    curve, eval per set (shard/eval loss and perplexity, bits per byte of each text set),
    tokens/s, peak memory, MFU. A damaged file is left out with a warning."""
    path = Path(run_dir) / PRETRAIN_REPORT
    if not path.is_file():
        return None
    try:
        r = read_json_file(path, "pretrain report")
        losses = [float(x) for x in r["losses"]]
        final = r.get("final") or {}
        every = max(1, -(-len(losses) // CURVE_POINTS))
        evals: dict[str, Any] = {}
        if final.get("shard_eval"):
            ev = final["shard_eval"]
            evals["shard/eval"] = {"loss": ev["loss"], "perplexity": ev["perplexity"]}
        for name, ev in (final.get("texts") or {}).items():
            evals[Path(name).name] = {"bpb": ev["bpb"], "bytes": ev["bytes"]}
        stats = {
            "steps": r["steps"],
            "tokens": r["tokens"],
            "num_params": r["num_params"],
            "train_loss_first": losses[0] if losses else None,
            "train_loss_last": losses[-1] if losses else None,
            "tokens_per_s": r["tokens_per_s"],
            "peak_memory_mb": r["peak_memory_bytes"] / 2**20,
            "mfu": r.get("mfu"),
            "stall_fraction": r.get("stall_fraction"),
            "device": r["device"],
            "precision": r["precision"],
            "loss_curve": [[i + 1, losses[i]] for i in range(0, len(losses), every)],
            "eval": evals,
        }
    except (DataError, KeyError, TypeError, ValueError, IndexError) as exc:
        log.warning("%s is damaged (%s): left out of the report", path, exc)
        return None
    return {"stage": "pretrain", "seconds": r.get("train_seconds", 0.0), "stats": stats}


def sync_report(manifest: Any, write: bool = True) -> dict[str, Any]:
    """Rebuild the report from the manifest; rewrite the file (atomically) if it differs."""
    from pipeline.stages import STAGES

    path = manifest.run_dir / REPORT_NAME
    old = _last_written(path)
    if old is None:
        try:
            old = read_report(manifest.run_dir)
        except DataError:
            log.warning("%s is damaged; rebuilt from manifest.json", path)
    report = build_report(manifest, list(STAGES), old)
    if write and report != old:
        text = json_text(report, REPORT_LEVELS) + "\n"
        atomic_write_bytes(path, text.encode())
        _remember(path, text)
    return report


# The report this process wrote last, as (path, (size, mtime_ns, inode), text): at the next
# commit the file is that text while its stat is unchanged (an atomic rewrite is a new inode),
# so the runner parses its own text instead of reading and checking the file again.
_LAST: list[tuple[str, tuple[int, int, int], str]] = []


def _stamp(path: Path) -> tuple[int, int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_size, st.st_mtime_ns, st.st_ino


def _remember(path: Path, text: str) -> None:
    stamp = _stamp(path)
    _LAST[:] = [] if stamp is None else [(str(path), stamp, text)]


def _last_written(path: Path) -> dict[str, Any] | None:
    if _LAST and _LAST[0][0] == str(path) and _LAST[0][1] == _stamp(path):
        return json.loads(_LAST[0][2])
    return None


def dropped_total(stats: dict[str, Any]) -> int:
    """Σ dropped_<reason> of a stage's stats: the one place they are summed."""
    return sum(v for k, v in stats.items() if k.startswith("dropped_") and isinstance(v, int))


def check_balance(stats: dict[str, Any]) -> None:
    """docs_in == docs_out + sum(dropped_*): every document is accounted for."""
    if "docs_in" not in stats or "docs_out" not in stats:
        return
    dropped = dropped_total(stats)
    if stats["docs_in"] != stats["docs_out"] + dropped:
        raise AssertionError(
            f"docs_in {stats['docs_in']} != docs_out {stats['docs_out']} + dropped {dropped}"
        )


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:,.3f}" if abs(value) < 1000 else f"{value:,.0f}"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    if isinstance(value, (dict, list)):
        text = json.dumps(value)
        return text if len(text) <= 70 else text[:67] + "..."
    return str(value)


_SPARK = " ▁▂▃▄▅▆▇█"


def _is_histogram(v: Any) -> bool:
    return isinstance(v, dict) and "counts" in v and ("bins" in v or "edges" in v)


def _spark(hist: dict[str, Any]) -> str:
    """counts as a one-line bar chart over the bin edges, threshold named."""
    counts = hist["counts"]
    edges = hist.get("bins") or hist.get("edges")
    top = max(counts) if counts and max(counts) > 0 else 1
    bars = "".join(_SPARK[min(8, -(-8 * c // top))] for c in counts)
    thr = hist.get("threshold")
    where = f" threshold={_fmt(thr)}" if thr is not None else ""
    where += f" ({hist['key']})" if hist.get("key") and thr is not None else ""
    return f"[{_fmt(edges[0])} |{bars}| {_fmt(edges[-1])}]{where} n={sum(counts):,}"


def _render(key: str, value: Any) -> list[str]:
    """One stat as lines: scalars inline, histograms as bars, tables of dicts one row each."""
    if _is_histogram(value):
        return [f"  {key}  {_spark(value)}"]
    if isinstance(value, dict) and value and all(isinstance(v, dict) for v in value.values()):
        lines = [f"  {key}"]
        width = max(len(str(k)) for k in value)
        for name, sub in value.items():
            if _is_histogram(sub):
                text = f"{sub.get('stat', '')} {_spark(sub)}".strip()
            else:
                text = "  ".join(
                    f"{k}={_fmt(v)}"
                    + (f" ({sub['key']})" if k == "threshold" and sub.get("key") else "")
                    for k, v in sub.items()
                    if not isinstance(v, (dict, list)) and k != "key"
                )
            lines.append(f"    {str(name).ljust(width)}  {text}")
        return lines
    return [f"  {key}  {_fmt(value)}"]


def format_report(report: dict[str, Any]) -> str:
    """A readable table: one summary row per stage, then each stage's own statistics."""
    head = ("stage", "docs_in", "docs_out", "dropped", "seconds", "docs/s", "MB/s")
    rows = [head]
    for s in report.get("stages", []):
        st = s.get("stats", {})
        dropped = dropped_total(st)
        rows.append(
            (
                s["stage"],
                _fmt(st.get("docs_in", "")),
                _fmt(st.get("docs_out", "")),
                _fmt(dropped),
                _fmt(s.get("seconds", 0.0)),
                _fmt(st.get("docs_per_s", "")),
                _fmt(st.get("mb_per_s", "")),
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    lines = [
        f"run: {report.get('recipe', {}).get('name', '?') if report.get('recipe') else '?'}"
        f"   seed: {report.get('seed')}",
        "",
    ]
    for r in rows:
        lines.append(
            "  ".join(
                c.ljust(w) if i == 0 else c.rjust(w)
                for i, (c, w) in enumerate(zip(r, widths, strict=False))
            )
        )
    skip = {"docs_in", "docs_out", "docs_per_s", "mb_per_s"}
    for s in report.get("stages", []):
        stats = s.get("stats", {})
        keys = setting_keys(stats)
        extra = {k: v for k, v in stats.items() if k not in skip and k not in keys.values()}
        if not extra:
            continue
        lines += ["", f"[{s['stage']}]"]
        width = max(len(k) for k in extra)
        for k, v in extra.items():
            rendered = _render(k.ljust(width), v)
            if k in keys:  # the recipe key that sets this value, next to it
                rendered[0] += f"  ({stats[keys[k]]})"
            lines += rendered
    return "\n".join(lines)


def setting_keys(stats: dict[str, Any]) -> dict[str, str]:
    """{stat: its `<stat>_key` entry} for the settings a stage echoes (see config.setting)."""
    return {
        k[: -len("_key")]: k
        for k, v in stats.items()
        if k.endswith("_key") and isinstance(v, str) and k[: -len("_key")] in stats
    }
