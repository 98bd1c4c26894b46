"""The charts of each stage's section in report.html: pure functions from a stage's stats (and
the whole report, for cross-stage marks such as pack.seq_len) to <figure> strings.

Every threshold line is labelled with the recipe key that sets it (the `key` / `<stat>_key`
entries the stages write); a stage this module does not know gets its counts or numbers drawn.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from pipeline.report.svg import DROPPED, KEPT, bars, columns, figure, fmt, hist_table, line, table

ALL_FAILING = "#8c8c8c"


_MISSING = object()


def recipe_value(report: dict[str, Any], key: str) -> Any:
    """The value of recipe key `clean.min_words` in the run's recipe (defaults filled in)."""
    node: Any = (report.get("recipe") or {}).get("config") or {}
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            return _MISSING
        node = node[part]
    return node


def _marker(
    value: float | None, key: str | None, report: dict[str, Any]
) -> tuple[float, str] | None:
    """(value, caption) of a threshold line: `clean.min_words = 50`, or, where the key sets the
    line indirectly (a switch, a keep fraction), `0.5 (clean.drop_empty = true)`."""
    if value is None:
        return None
    if not key:
        return (value, f"threshold {fmt(value)}")
    setting = recipe_value(report, key)
    if setting is _MISSING or setting == value and not isinstance(setting, bool):
        return (value, f"{key} = {fmt(value)}")
    return (value, f"{fmt(value)} ({key} = {fmt(setting)})")


def _dropped_side(edges: Sequence[float], thr: float | None, direction: str | None) -> list[bool]:
    """Columns on the dropped side of the threshold (max: above it; min: below it)."""
    n = len(edges) - 1
    if thr is None or direction not in ("min", "max"):
        return [False] * n
    if direction == "max":
        return [edges[i] >= thr for i in range(n)]
    return [edges[i + 1] <= thr for i in range(n)]


def dropped_counts(stats: dict[str, Any]) -> dict[str, int]:
    """{reason: documents} from a stage's `dropped_<reason>` counts."""
    return {
        k.removeprefix("dropped_"): v
        for k, v in stats.items()
        if k.startswith("dropped_") and isinstance(v, int)
    }


def _drop_figure(name: str, stats: dict[str, Any]) -> str:
    """Documents in, out and dropped per reason of one stage (or its scalar numbers)."""
    if "docs_in" not in stats or "docs_out" not in stats:
        return _numbers_figure(stats)
    drops = dropped_counts(stats)
    labels = ["in", "out", *drops]
    values = [stats["docs_in"], stats["docs_out"], *drops.values()]
    svg = bars(f"{name}: documents in, out and dropped by reason", labels, [("", values, KEPT)])
    rows = [[k, v] for k, v in zip(labels, values, strict=True)]
    return figure(svg, "dropped_<reason> counts; in = out + dropped", table(["", "docs"], rows))


def _dict_figure(title: str, mapping: dict[str, Any], unit: str, caption: str) -> str:
    labels = list(mapping)
    values = [float(v) for v in mapping.values()]
    svg = bars(title, labels, [("", values, KEPT)])
    return figure(svg, caption, table(["", unit], [[k, v] for k, v in mapping.items()]))


def _numbers_figure(stats: dict[str, Any]) -> str:
    nums = {
        k: v for k, v in stats.items() if isinstance(v, (int, float)) and not isinstance(v, bool)
    }
    return _dict_figure("numbers", nums, "value", "scalar statistics") if nums else ""


def _download(st: dict[str, Any], report: dict[str, Any]) -> list[str]:
    figs = [_drop_figure("download", st)]
    if st.get("docs_per_source"):
        figs.append(
            _dict_figure("documents per source", st["docs_per_source"], "docs", "what each gave")
        )
    if isinstance(st.get("mix"), dict) and st["mix"]:
        figs.append(_mix_figure(st["mix"]))
    return figs


def _mix_figure(mix: dict[str, Any]) -> str:
    """download.sources: documents per source before and after its weight (`wiki × 3`)."""
    rows = [
        (str(m.get("shown_as", n)), m.get("docs_before"), m.get("docs_after"))
        for n, m in mix.items()
    ]
    labels = [r[0] for r in rows]
    before = [float(r[1]) if _is_count(r[1]) else None for r in rows]
    after = [float(r[2]) if _is_count(r[2]) else None for r in rows]
    svg = bars(
        "mix: documents per source before and after",
        labels,
        [("before", before, DROPPED), ("after", after, KEPT)],
    )
    body = table(["source × weight", "before", "after"], [list(r) for r in rows])
    return figure(svg, "download.sources: weight > 1 repeats passes, < 1 samples", body)


def _is_count(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _histogram_figure(
    name: str, h: dict[str, Any], report: dict[str, Any], unit: str = "docs"
) -> str:
    edges = h.get("bins") or h.get("edges")
    thr, key = h.get("threshold"), h.get("key")
    stat = h.get("stat", name)
    side = _dropped_side(edges, thr, h.get("direction"))
    svg = columns(
        f"{name}: {stat}",
        edges,
        h["counts"],
        marker=_marker(thr, key, report),
        dropped=side,
        xlabel=stat,
    )
    what = (
        f"drops {'above' if h.get('direction') == 'max' else 'below'} the line"
        if h.get("direction")
        else ""
    )
    caption = f"{sum(h['counts']):,} {unit}"
    caption += f"; threshold {fmt(thr)}" if thr is not None else ""
    caption += f" set by {key}" if key and thr is not None else ""
    caption += f"; no threshold: {key} is null" if key and thr is None else ""
    caption += f"; {what} (orange)" if what and thr is not None else ""
    return figure(svg, caption, hist_table(edges, h["counts"], unit))


def _clean(st: dict[str, Any], report: dict[str, Any]) -> list[str]:
    figs = []
    rules = {k: r for k, r in st.get("rules", {}).items() if r.get("all")}
    if rules:
        labels = list(rules)
        first = [r["first"] for r in rules.values()]
        all_ = [r["all"] for r in rules.values()]
        svg = bars(
            "clean: documents failing each rule",
            labels,
            [
                ("first failing (counted as its drop)", first, DROPPED),
                ("all failing", all_, ALL_FAILING),
            ],
        )
        rows = [
            [k, r.get("key", ""), r.get("threshold"), r["first"], r["all"], r.get("alone", "")]
            for k, r in rules.items()
        ]
        figs.append(
            figure(
                svg,
                "a document failing several rules counts once, under its first failing rule",
                table(["rule", "recipe key", "threshold", "first", "all", "alone"], rows, 2),
            )
        )
    figs = figs or [_drop_figure("clean", st)]  # no rule failed: in and out still shown
    if st.get("docs_per_language"):
        figs.append(_language_figure(st))
    # the rules that decide most first (by documents failing them), then rule order;
    # rules switched off (threshold null) draw nothing
    hists = [(n, h) for n, h in st.get("histograms", {}).items() if h.get("threshold") is not None]
    fails = {n: st.get("rules", {}).get(n, {}).get("all", 0) for n, _ in hists}
    for name, h in sorted(hists, key=lambda nh: -fails[nh[0]]):
        figs.append(_histogram_figure(name, h, report))
    return figs


def _language_figure(st: dict[str, Any], top: int = 20) -> str:
    """Documents in and kept per detected language (the `top` most frequent; the rest summed
    as `other`)."""
    seen, kept = st["docs_per_language"], st.get("kept_per_language") or {}
    labels = list(seen)[:top]
    rest = list(seen)[top:]
    ins = [seen[k] for k in labels]
    outs = [kept.get(k, 0) for k in labels]
    if rest:
        labels.append(f"other ({len(rest)})")
        ins.append(sum(seen[k] for k in rest))
        outs.append(sum(kept.get(k, 0) for k in rest))
    svg = bars(
        "clean: documents per language",
        labels,
        [("in", ins, ALL_FAILING), ("kept", outs, KEPT)],
    )
    rows = [[k, a, b] for k, a, b in zip(labels, ins, outs, strict=True)]
    caption = "detected language (lang column); kept: after every clean rule"
    return figure(svg, caption, table(["language", "in", "kept"], rows))


def _dedup(st: dict[str, Any], report: dict[str, Any]) -> list[str]:
    from pipeline.dedup.lsh import s_curve

    figs = [_drop_figure("dedup", st)]
    sizes = st.get("cluster_size_histogram") or {}
    if sizes:
        # labels are sizes or bucket ranges (dedup.cluster.size_histogram): '3', '5-8', '17+'
        labels = sorted(sizes, key=lambda k: int(k.split("-")[0].rstrip("+")))
        counts = [sizes[k] for k in labels]
        svg = columns("dedup: near-duplicate cluster sizes", None, counts, labels=labels)
        figs.append(
            figure(
                svg,
                f"clusters of documents (size = members, one kept); largest "
                f"{fmt(st.get('largest_cluster_size'))}",
                table(["size", *labels], [["clusters", *counts]]),
            )
        )
    bands, rows = st.get("bands"), st.get("rows")
    if bands and rows:
        pts = [(i / 50, float(s_curve(i / 50, bands, rows))) for i in range(51)]
        thr = st.get("threshold")
        svg = line(
            f"dedup: LSH S-curve, {bands} bands x {rows} rows",
            pts,
            marker=_marker(thr, st.get("threshold_key"), report),
            xlabel="Jaccard similarity of a pair",
            ylabel="P(pair becomes a candidate)",
        )
        curve = st.get("s_curve") or {}
        figs.append(
            figure(
                svg,
                f"pairs at the threshold are found with probability "
                f"{fmt(float(s_curve(thr, bands, rows))) if thr else '?'}; "
                f"set by {st.get('bands_key', 'dedup.bands')}/{st.get('rows_key', 'dedup.rows')} "
                "or derived from the threshold",
                table(["Jaccard", *curve], [["P(candidate)", *curve.values()]]),
            )
        )
    if "merge_precision_sample" in st:
        figs.append(_dedup_measured(st))
    return figs


def _ci_text(st: dict[str, Any], key: str) -> str:
    lo, hi = st.get(f"{key}_ci95") or (None, None)
    return "n/a" if st.get(key) is None else f"{fmt(st[key])} ({fmt(lo)}–{fmt(hi)})"


def _dedup_measured(st: dict[str, Any]) -> str:
    """Precision of merges and recall of pairs measured in the run, with 95% intervals."""
    labels = ["merge precision", "pair recall"]
    values = [st.get("merge_precision"), st.get("pair_recall")]
    rows = [
        [
            "merge precision",
            _ci_text(st, "merge_precision"),
            st.get("merge_precision_sample"),
            "merged pairs (dropped, kept) with exact Jaccard >= threshold",
        ],
        [
            "pair recall",
            _ci_text(st, "pair_recall"),
            st.get("pair_recall_pairs"),
            f"pairs >= threshold among {fmt(st.get('pair_recall_docs'))} sampled documents "
            "that ended in one cluster",
        ],
    ]
    if st.get("labelled_f1") is not None:
        labels.append("labelled F1")
        values.append(st["labelled_f1"])
        rows.append(
            [
                "labelled P / R / F1",
                f"{fmt(st['labelled_precision'])} / {fmt(st['labelled_recall'])} / "
                f"{fmt(st['labelled_f1'])}",
                st["labelled_tp"] + st["labelled_fn"],
                "documents labelled as duplicates",
            ]
        )
    svg = bars("dedup: measured in this run", labels, [("", values, KEPT)])
    caption = (
        f"exact Jaccard on the stage's shingles, seeded samples "
        f"({st.get('merge_precision_sample_key')}, {st.get('pair_recall_docs_key')}); "
        f"95% Wilson intervals; cost {fmt(st.get('measure_cpu_seconds'))} CPU s"
    )
    return figure(svg, caption, table(["", "estimate (95% CI)", "sample", "what"], rows))


def _quality(st: dict[str, Any], report: dict[str, Any]) -> list[str]:
    figs = [_drop_figure("quality", st)]
    h = st.get("score_histogram")
    if h:
        h = {**h, "stat": f"{st.get('score', '')} score", "direction": "min"}
        h.setdefault("key", st.get("threshold_key"))
        figs.append(_histogram_figure("quality", h, report))
    h = st.get("perplexity_histogram")
    if h:
        h = {**h, "stat": "LM perplexity (log bins)"}
        figs.append(_histogram_figure("quality", h, report))
    for name in ("coherence", "heuristic"):
        h = st.get(f"{name}_histogram")
        if h:
            figs.append(_histogram_figure("quality", {**h, "stat": f"{name} score"}, report))
    h = st.get("external_histogram")
    if h:  # the user's model: its score, its min_score marked
        stat = f"external score ({st.get('external', {}).get('kind', '')} model)"
        figs.append(_histogram_figure("quality", {**h, "stat": stat, "direction": "min"}, report))
    return figs


def _pack_seq_len(report: dict[str, Any]) -> tuple[int | None, str | None]:
    for s in report.get("stages", []):
        if s.get("stage") == "pack":
            return s["stats"].get("seq_len"), s["stats"].get("seq_len_key")
    return None, None


def _tokenize(st: dict[str, Any], report: dict[str, Any]) -> list[str]:
    figs = [_drop_figure("tokenize", st)]
    h = st.get("doc_tokens_histogram")
    if h:
        seq_len, key = _pack_seq_len(report)
        svg = columns(
            "tokenize: document length in tokens",
            h["edges"],
            h["counts"],
            marker=_marker(seq_len, key, report),
            xlabel="tokens per document (EOS excluded)",
        )
        caption = f"mean {fmt(st.get('doc_tokens_mean'))}, max {fmt(st.get('doc_tokens_max'))}"
        if seq_len:
            caption += f"; documents right of {key} are split across sequences by pack"
        figs.append(figure(svg, caption, hist_table(h["edges"], h["counts"])))
    if st.get("bytes_per_token_by_script"):
        figs.append(_bytes_per_token_figure(st))
    return figs


def _bytes_per_token_figure(st: dict[str, Any]) -> str:
    """Bytes/token per dominant script against its healthy range; the warnings as the caption."""
    by = st["bytes_per_token_by_script"]
    labels = list(by)
    values = [by[k]["bytes_per_token"] for k in labels]
    svg = bars("tokenize: UTF-8 bytes per token by script", labels, [("", values, KEPT)])
    rows = [
        [
            k,
            r["docs"],
            r["bytes"],
            r["tokens"],
            r["bytes_per_token"],
            "–".join(fmt(x) for x in r["healthy"]) if r["healthy"] else "none known",
        ]
        for k, r in by.items()
    ]
    warns = st.get("bytes_per_token_warnings") or []
    caption = "warning: " + "; ".join(warns) if warns else "every script in its healthy range"
    return figure(
        svg, caption, table(["script", "docs", "bytes", "tokens", "bytes/token", "healthy"], rows)
    )


def _pack(st: dict[str, Any], report: dict[str, Any]) -> list[str]:
    figs = []
    h = st.get("fill_histogram")
    if h:
        edges = [e * 100 for e in h["edges"]]
        svg = columns(
            "pack: sequences by fill", edges, h["counts"], xlabel="% of seq_len holding tokens"
        )
        figs.append(
            figure(
                svg,
                f"{fmt(st.get('sequences'))} sequences of {st.get('seq_len_key', 'seq_len')} = "
                f"{fmt(st.get('seq_len'))}; padding {fmt(st.get('padding_pct'))}%",
                hist_table(edges, h["counts"], "sequences"),
            )
        )
    if "tokens_out" in st and "padding_tokens" in st:
        labels = ["document tokens", "padding tokens"]
        values = [st["tokens_out"], st["padding_tokens"]]
        svg = bars("pack: tokens and padding", labels, [("", values, KEPT)])
        rows = [
            ["sequences", st.get("sequences")],
            ["lower bound (sum of lengths / seq_len)", st.get("lower_bound_sequences")],
            ["fill vs lower bound", st.get("fill_vs_lower_bound")],
            ["docs split across sequences", st.get("docs_split")],
            ["docs split by plain concatenation", st.get("docs_split_concat")],
        ]
        figs.append(figure(svg, f"strategy {st.get('strategy')}", table(["", "value"], rows)))
    return figs or [_drop_figure("pack", st)]


def _shard(st: dict[str, Any], report: dict[str, Any]) -> list[str]:
    figs = []
    # shuffle numbers have different units (a rank correlation, ratios, samples): a table
    shuffle = {k: v for k, v in st.items() if k.startswith("shuffle_")}
    shuffle_table = table(["shuffle of the train order", "value"], list(shuffle.items()))
    for sub in ("train", "eval"):
        sizes = st.get(f"shard_sizes_{sub}")
        if not sizes:
            continue
        shown = sizes[:200]
        labels = [str(i) for i in range(len(shown))]
        svg = columns(f"shard: {sub} shard sizes", None, shown, labels=labels, xlabel="shard")
        caption = f"{len(sizes)} shard(s), {fmt(sum(sizes))} sequences"
        caption += f" (first {len(shown)} drawn)" if len(shown) < len(sizes) else ""
        caption += f"; {st.get('shard_size_key', 'shard_size')} = {fmt(st.get('shard_size'))}"
        if sub == "train" and shuffle:
            caption += (
                "; shuffle: spearman near 0 = order unrelated to the input, same-source ratio "
                "near 1 and share deviation near 0 = each shard mixed like the whole"
            )
        numbers = table(["shard", *labels], [["sequences", *shown]])
        figs.append(figure(svg, caption, numbers + (shuffle_table if sub == "train" else "")))
    if st.get("sequences_per_source"):
        figs.append(
            _dict_figure(
                "shard: sequences per source", st["sequences_per_source"], "sequences", "selected"
            )
        )
    return figs or _generic(st, report)


def _pretrain(st: dict[str, Any], report: dict[str, Any]) -> list[str]:
    """The proxy model's loss curve and its eval table (pipeline pretrain)."""
    figs = []
    curve = st.get("loss_curve") or []
    if curve:
        steps, losses = [p[0] for p in curve], [p[1] for p in curve]
        lo, hi, last = min(losses), max(losses), max(steps)
        pts = [(s / last, (v - lo) / (hi - lo) if hi > lo else 0.5) for s, v in curve]
        svg = line(
            f"pretrain: train loss {fmt(hi)} (top) to {fmt(lo)} (bottom)",
            pts,
            xlabel=f"step (1 = step {last})",
            ylabel="loss, scaled",
        )
        figs.append(figure(svg, "nats per target token, per optimiser step"))
    ev = st.get("eval") or {}
    if ev:
        rows = [
            [k, v.get("loss", ""), v.get("perplexity", ""), v.get("bpb", "")] for k, v in ev.items()
        ]
        figs.append(
            figure(
                "", "evaluation at the last step", table(["set", "loss", "ppl", "bits/byte"], rows)
            )
        )
    return figs


def _line_dedup(st: dict[str, Any], report: dict[str, Any]) -> list[str]:
    figs = [_drop_figure("line_dedup", st)]
    unit, examples = st.get("unit", "line"), st.get("examples") or []
    if examples:
        labels = [e["text"][:48] for e in examples]
        values = [e["docs"] for e in examples]
        svg = bars(
            f"most repeated {unit}s: documents holding each", labels, [("", values, DROPPED)]
        )
        note = f"each stays in one document; {fmt(st.get(f'{unit}s_removed', 0))} {unit}s removed"
        rows = [[e["text"], e["docs"]] for e in examples]
        figs.append(figure(svg, note, table([unit, "docs"], rows)))
    return figs


def _decontaminate(st: dict[str, Any], report: dict[str, Any]) -> list[str]:
    figs = [_drop_figure("decontaminate", st)]
    if st.get("contaminated_docs_by_eval"):
        caption = f"documents sharing a {st.get('ngram', '')}-gram with each eval file"
        by_eval = st["contaminated_docs_by_eval"]
        figs.append(_dict_figure("contaminated documents per eval file", by_eval, "docs", caption))
    return figs


def _generic(st: dict[str, Any], report: dict[str, Any]) -> list[str]:
    fig = _drop_figure("stage", st)
    return [fig] if fig else []


SECTIONS: dict[str, Callable[[dict[str, Any], dict[str, Any]], list[str]]] = {
    "download": _download,
    "clean": _clean,
    "dedup": _dedup,
    "line_dedup": _line_dedup,
    "quality": _quality,
    "decontaminate": _decontaminate,
    "tokenize": _tokenize,
    "pack": _pack,
    "shard": _shard,
    "pretrain": _pretrain,
}


def stage_figures(name: str, stats: dict[str, Any], report: dict[str, Any]) -> list[str]:
    """The <figure>s of stage `name`'s section."""
    return SECTIONS.get(name, _generic)(stats, report)
