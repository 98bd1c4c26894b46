"""ablate: the same proxy, seeds and token budget on several data runs, scored on the same texts.

Bits per byte is the yardstick (each run tokenizes the texts with its own tokenizer, so runs
with different vocabularies compare). Each (run, seed) trains into `<out>/<label>/seed<k>/`;
a cell whose report.json was made with the same config and data is reused, so an interrupted
ablation re-run only trains what is missing. Output: one table (stdout), ablate.json and
ablate.html in `<out>`.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import statistics
from pathlib import Path
from typing import Any

from pipeline.errors import PipelineError
from pipeline.io import atomic_write_bytes, atomic_write_json
from pipeline.train.config import PretrainConfig
from pipeline.train.data import RunData, read_eval_texts
from pipeline.train.trainer import REPORT_NAME, pretrain

log = logging.getLogger("pipeline")


def labels_for(runs: list[Path]) -> list[str]:
    """Folder names, or whole paths where two runs share a name."""
    names = [r.name or str(r) for r in runs]
    return [n if names.count(n) == 1 else str(r) for n, r in zip(names, runs, strict=True)]


def _cell(cfg: PretrainConfig, run: Path, out: Path, progress: bool) -> dict[str, Any]:
    path = out / REPORT_NAME
    want = dataclasses.asdict(cfg)
    if path.is_file():
        try:
            old = json.loads(path.read_text(encoding="utf-8"))
            same = isinstance(old, dict) and old.get("config") == want  # damaged: train anew
            if same and old.get("data") == RunData(run).fingerprint():
                log.info("ablate: %s is done (same config and data), reused", path)
                return old
        except (ValueError, OSError):
            pass
    return pretrain(cfg, run, out, force=True, progress=progress)


def summarize(values: list[float]) -> tuple[float, float | None]:
    """(mean, sample standard deviation over seeds; None for one seed)."""
    return statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else None


def ablate(
    cfg: PretrainConfig,
    runs: list[Path],
    eval_texts: list[str],
    seeds: list[int] | None,
    out_dir: Path,
    progress: bool = True,
) -> dict[str, Any]:
    """Train and score every (run, seed); returns {rows, table, json_path, html_path}."""
    if not runs:
        raise PipelineError("ablate: give at least one run folder")
    for p in eval_texts:
        read_eval_texts(p)  # a missing or empty text fails before any training
    datas = [RunData(r) for r in runs]  # every run must have shards, up front
    seeds = seeds or [cfg.seed]
    budget = cfg.max_tokens or cfg.total_steps(datas[0].seq_len) * cfg.tokens_per_step(
        datas[0].seq_len
    )
    base = dataclasses.replace(
        cfg, eval_texts=list(eval_texts), max_tokens=budget, eval_every=0, save_every=0
    )
    labels = labels_for(runs)
    rows = []
    for label, run in zip(labels, runs, strict=True):
        cells = {}
        for seed in seeds:
            log.info("ablate: %s seed %d (%d tokens)", label, seed, budget)
            rep = _cell(
                dataclasses.replace(base, seed=seed), run, out_dir / label / f"seed{seed}", progress
            )
            cells[seed] = rep
        rows.append(_row(label, run, cells, eval_texts))
    first = rows[0]
    for row in rows:
        for name, cell in row["bpb"].items():
            cell["delta"] = cell["mean"] - first["bpb"][name]["mean"]
    result = {
        "config": dataclasses.asdict(base),
        "seeds": seeds,
        "token_budget": budget,
        "eval_texts": list(eval_texts),
        "rows": rows,
    }
    out_dir.mkdir(parents=True, exist_ok=True)
    json_path, html_path = out_dir / "ablate.json", out_dir / "ablate.html"
    atomic_write_json(json_path, result)
    atomic_write_bytes(html_path, render_html(result).encode("utf-8"))
    return {**result, "table": format_table(result), "json_path": json_path, "html_path": html_path}


def _row(label: str, run: Path, cells: dict[int, dict], eval_texts: list[str]) -> dict[str, Any]:
    bpb = {}
    for name in eval_texts:
        values = [c["final"]["texts"][name]["bpb"] for c in cells.values()]
        mean, spread = summarize(values)
        bpb[Path(name).name] = {"mean": mean, "std": spread, "per_seed": values}
    one = next(iter(cells.values()))
    return {
        "run": label,
        "run_dir": str(run),
        "tokens": one["tokens"],
        "steps": one["steps"],
        "vocab_size": one["shape"]["vocab_size"],
        "train_loss_last": statistics.fmean(c["losses"][-1] for c in cells.values()),
        "tokens_per_s": statistics.fmean(c["tokens_per_s"] for c in cells.values()),
        "bpb": bpb,
    }


def _pm(cell: dict[str, Any]) -> str:
    return f"{cell['mean']:.4f}" + (f" ± {cell['std']:.4f}" if cell["std"] is not None else "")


def table_rows(result: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    sets = list(result["rows"][0]["bpb"]) if result["rows"] else []
    head = ["run", "tokens"] + [f"{s} BPB" for s in sets] + [f"Δ {s}" for s in sets]
    body = []
    for i, row in enumerate(result["rows"]):
        cells = [row["run"], f"{row['tokens']:,}"]
        cells += [_pm(row["bpb"][s]) for s in sets]
        cells += ["—" if i == 0 else f"{row['bpb'][s]['delta']:+.4f}" for s in sets]
        body.append(cells)
    return head, body


def format_table(result: dict[str, Any]) -> str:
    head, body = table_rows(result)
    widths = [max(len(r[i]) for r in [head, *body]) for i in range(len(head))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in [head, *body]]
    n = len(result["seeds"])
    note = (
        f"bits per byte (lower is better), mean ± std over {n} seeds"
        if n > 1
        else ("bits per byte (lower is better), one seed: no spread measured")
    )
    return "\n".join([*lines, note])


def render_html(result: dict[str, Any]) -> str:
    from pipeline.report.html import page
    from pipeline.report.svg import KEPT, bars, esc, figure, table

    head, body = table_rows(result)
    sections = [("table", "Bits per byte", table(head, body))]
    labels = [r["run"] for r in result["rows"]]
    for s in result["rows"][0]["bpb"] if result["rows"] else {}:
        values = [r["bpb"][s]["mean"] for r in result["rows"]]
        svg = bars(f"{s}: bits per byte (lower is better)", labels, [("", values, KEPT)])
        sections.append((f"set-{s}", s, figure(svg, "mean over seeds")))
    meta = (
        f"seeds {esc(result['seeds'])} · {result['token_budget']:,} train tokens per run · "
        f"model {esc({k: result['config'][k] for k in ('n_layer', 'n_head', 'd_model')})}"
    )
    return page("pipeline ablate", meta, sections)
