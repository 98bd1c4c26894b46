"""Quality on real text vs machine-made junk that passes clean (issue 13).

Real documents from /work/shared/corpora (Wikipedia articles, Reuters news, TinyStories, C4 and
CCNet-head web pages, Shakespeare pages) are mixed with junk made from them by generators that
share no code with the stage's own corruptions (quality/corrupt.py). The mix runs through the
real runner (download jsonl -> clean -> quality, default quality config: score combined,
reference self); we count, per source and junk kind, what reaches quality and what it keeps,
and the ROC-AUC of the `quality` column. The previous default (score: mean, the pseudo-label
classifier) and the heuristic alone are scored on the same documents as peers. Non-English:
Chinese (CMRC Wikipedia passages, hotel reviews) and Russian (TinyStories-ru) alone and mixed
in. Writes outputs/benchmarks/quality_real.json (`--out`; not with `--only-default`).
Run: .venv/bin/python benchmarks/bench_quality_real.py [--quick]
"""

from __future__ import annotations

import argparse
import csv
import json
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_quality import BOILERPLATE, CORPORA, load_real  # noqa: E402
from pipeline.quality.logreg import roc_auc  # noqa: E402
from pipeline.recipe import build_recipe  # noqa: E402
from pipeline.run.runner import run_recipe  # noqa: E402

JUNK = (
    "word_salad",  # corpus-frequency words at a real document's sentence lengths
    "shuffled",  # a document's words shuffled, cut back into its own line lengths
    "every_other_word",  # every other word of each line dropped
    "markov_bigram",  # a word-bigram chain over the corpus: locally fluent, globally random
    "markov_trigram",  # an order-2 word chain over the source: every 3-gram is real
    "cross_splice",  # real sentences of several other documents of the source, shuffled
    "spliced_salad",  # first half real, second half word salad
    "keyword_spam",
    "boilerplate",
)
LM_COLS = ("perplexity", "context_gain")
NOT_TARGET = ("sentence_shuffle",)  # real sentences in a random order: reported, not a target
_SENT = re.compile(r"(?<=[.!?])\s+")
_SENT_ZH = re.compile(r"(?<=[。！？!?])")
_HAN = re.compile(r"[\u4e00-\u9fff]")
# the kinds built for Chinese and Russian too (their own corpus as the pool)
OTHER_LANG_JUNK = ("word_salad", "shuffled", "markov_bigram", "markov_trigram", "cross_splice")


def _units(doc: str) -> tuple[list[str], str]:
    """(tokens, joiner): characters for Chinese (no spaces), whitespace words otherwise."""
    if len(_HAN.findall(doc[:200])) > 20:
        return [c for c in doc if not c.isspace()], ""
    return doc.split(), " "


def _sentences(doc: str) -> list[str]:
    rx = _SENT_ZH if _units(doc)[1] == "" else _SENT
    return [x for x in rx.split(doc) if x.strip()]


def markov(docs: list[str], order: int, n: int, rng: np.random.Generator) -> str:
    """An order-`order` chain over the documents' tokens (restarts at a random place when a
    state has no successor). Independent of the stage's own walks (quality/corrupt.py)."""
    seqs = [_units(d)[0] for d in docs]
    joiner = _units(docs[0])[1]
    follow: dict[tuple, list[str]] = {}
    for t in seqs:
        for i in range(order, len(t)):
            follow.setdefault(tuple(t[i - order : i]), []).append(t[i])
    starts = [t for t in seqs if len(t) > order]

    def restart() -> list[str]:
        t = starts[int(rng.integers(len(starts)))]
        i = int(rng.integers(len(t) - order))
        return t[i : i + order]

    out = restart()
    while len(out) < n:
        nxt = follow.get(tuple(out[-order:]))
        out += [nxt[int(rng.integers(len(nxt)))]] if nxt else restart()
    return joiner.join(out[:n])


def cross_splice(doc: str, others: list[str], rng: np.random.Generator) -> str:
    """Sentences of 3-6 other documents, shuffled together, to about this document's length."""
    picks = [others[int(i)] for i in rng.choice(len(others), int(rng.integers(3, 7)))]
    sents = [x for o in picks for x in _sentences(o)]
    sents = [sents[int(i)] for i in rng.permutation(len(sents))]
    units, joiner = _units(doc)
    out, size = [], 0
    for x in sents:
        if size >= len(units):
            break
        out.append(x.strip())
        size += len(_units(x)[0])
    return joiner.join(out)


def shakespeare_pages(max_docs: int) -> list[str]:
    text = (CORPORA / "tinyshakespeare" / "input.txt").read_text(encoding="utf-8")
    pages, cur = [], ""
    for speech in text.split("\n\n"):
        cur = f"{cur}\n\n{speech}" if cur else speech
        if len(cur) >= 2000:
            pages.append(cur)
            cur = ""
    return pages[:max_docs]


def _salad(n: int, pool: list[str], rng: np.random.Generator) -> str:
    words = [pool[int(i)].strip(".!?") for i in rng.integers(len(pool), size=max(n, 1))]
    words[0] = words[0][:1].upper() + words[0][1:]
    return " ".join(words) + "."


def _chain(pool: list[str], n: int, rng: np.random.Generator, follow: dict) -> str:
    w = pool[int(rng.integers(len(pool)))]
    out = [w]
    for _ in range(n - 1):
        nxt = follow.get(w)
        w = nxt[int(rng.integers(len(nxt)))] if nxt else pool[int(rng.integers(len(pool)))]
        out.append(w)
    return " ".join(out)


def make_junk(
    kind: str,
    doc: str,
    rng: np.random.Generator,
    pool: list[str],
    follow: dict,
    source_docs: list[str] | None = None,
) -> str:
    lines = [ln for ln in doc.split("\n") if ln.strip()]
    words = doc.split()
    if kind == "markov_trigram":
        return markov(source_docs or [doc], 2, len(_units(doc)[0]), rng)
    if kind == "cross_splice":
        others = [d for d in (source_docs or []) if d is not doc] or [doc]
        return cross_splice(doc, others, rng)
    if _units(doc)[1] == "" and kind in ("word_salad", "shuffled", "markov_bigram"):
        units = _units(doc)[0]  # Chinese: the same kinds over characters
        if kind == "shuffled":
            return "".join(units[int(i)] for i in rng.permutation(len(units)))
        if kind == "markov_bigram":
            return markov(source_docs or [doc], 1, len(units), rng)
        chars = [c for d in (source_docs or [doc]) for c in _units(d)[0]]
        return "".join(chars[int(i)] for i in rng.integers(len(chars), size=len(units)))
    if kind == "word_salad":
        return " ".join(_salad(len(s.split()), pool, rng) for s in _SENT.split(doc) if s.strip())
    if kind == "shuffled":
        perm = [words[i] for i in rng.permutation(len(words))]
        out, pos = [], 0
        for ln in lines:
            k = len(ln.split())
            out.append(" ".join(perm[pos : pos + k]))
            pos += k
        return "\n".join(out)
    if kind == "every_other_word":
        return "\n".join(" ".join(ln.split()[::2]) for ln in lines)
    if kind == "markov_bigram":
        if not follow:  # a set without a shared bigram table: the source's own order-1 chain
            return markov(source_docs or [doc], 1, len(words), rng)
        return _chain(pool, len(words), rng, follow)
    if kind == "spliced_salad":
        sents = [s for s in _SENT.split(doc) if s.strip()]
        half = max(len(sents) // 2, 1)
        tail = " ".join(_salad(len(s.split()), pool, rng) for s in sents[half:]) or _salad(
            20, pool, rng
        )
        return " ".join(sents[:half]) + " " + tail
    if kind == "sentence_shuffle":
        sents = [s for s in _SENT.split(doc) if s.strip()]
        return " ".join(sents[i] for i in rng.permutation(len(sents)))
    if kind == "keyword_spam":
        long = sorted({w.strip(".,;:!?\"'()").lower() for w in words if len(w) > 5}) or ["buy"]
        keys = [long[int(i)] for i in rng.integers(len(long), size=6)]
        return " ".join(keys[int(i)] for i in rng.integers(6, size=max(80, len(words))))
    lines = [BOILERPLATE[int(i)] for i in rng.integers(len(BOILERPLATE), size=25)]
    lines.insert(int(rng.integers(25)), " ".join(words[:20]))
    return "\n".join(lines)


def build_set(max_per_source: int, seed: int) -> list[dict]:
    """Real documents (label 1) and one junk document per two real ones (label 0), kinds in
    rotation over JUNK + NOT_TARGET, each made from a real document of the same source."""
    real = load_real(max_per_source)
    real["shakespeare"] = shakespeare_pages(max_per_source // 2)
    pool = [w for docs in real.values() for d in docs for w in d.split()]
    follow: dict[str, list[str]] = {}
    for a, b in zip(pool, pool[1:], strict=False):
        follow.setdefault(a, []).append(b)
    rng = np.random.default_rng(seed)
    kinds = JUNK + NOT_TARGET
    rows, j = [], 0
    for source, docs in real.items():
        for i, doc in enumerate(docs):
            rows.append({"text": doc, "label": 1, "kind": f"real:{source}"})
            if i % 2 == 0:
                kind = kinds[j % len(kinds)]
                j += 1
                junk = make_junk(kind, doc, rng, pool, follow, docs)
                rows.append({"text": junk, "label": 0, "kind": f"junk:{kind}"})
    return rows


def with_junk(texts: list[str], seed: int) -> list[dict]:
    """A non-English set: the real documents and one junk document per two, OTHER_LANG_JUNK
    kinds in rotation, made from the same language's documents."""
    rng = np.random.default_rng(seed)
    pool = [w for d in texts for w in d.split()]
    rows = []
    for i, doc in enumerate(texts):
        rows.append({"text": doc, "label": 1, "kind": "real:doc"})
        if i % 2 == 0:
            kind = OTHER_LANG_JUNK[(i // 2) % len(OTHER_LANG_JUNK)]
            junk = make_junk(kind, doc, rng, pool, {}, texts)
            rows.append({"text": junk, "label": 0, "kind": f"junk:{kind}"})
    return rows


def chinese(max_docs: int) -> list[str]:
    data = json.loads((CORPORA / "cmrc2018_zh" / "cmrc2018_dev.json").read_text("utf-8"))
    wiki = [p["context"] for d in data["data"] for p in d["paragraphs"]][:max_docs]
    with open(CORPORA / "chinese_reviews" / "ChnSentiCorp_htl_all.csv", encoding="utf-8") as f:
        reviews = [r["review"] for r in csv.DictReader(f) if len(r["review"] or "") >= 60]
    return wiki + reviews[:max_docs]


def russian(max_docs: int) -> list[str]:
    path = next((CORPORA / "tinystories_ru").glob("*.jsonl"))
    with open(path, encoding="utf-8") as f:
        return [json.loads(line)["story"] for line in f if line.strip()][:max_docs]


def run(rows: list[dict], work: Path, quality: dict, repeats: int = 1) -> tuple[dict, dict]:
    """download -> clean -> quality through the runner; (per-id row of quality columns incl.
    kept, stage stats + median seconds). Later repeats rerun only quality."""
    work.mkdir(parents=True, exist_ok=True)
    src = work / "mixed.jsonl"
    with open(src, "w", encoding="utf-8") as f:
        for i, r in enumerate(rows):
            f.write(json.dumps({"id": f"doc{i}", "text": r["text"]}) + "\n")
    raw = {
        "name": "bench",
        "seed": 0,
        "out_dir": str(work / "run"),
        "workers": 1,
        "download": {"source": "jsonl", "path": str(src), "docs_per_part": 1000},
        "clean": {},
        "quality": quality,
    }
    recipe = build_recipe(raw)
    seconds, cpu = [], []
    for i in range(repeats):
        if i > 0:  # CPU seconds of this process (workers: 1 runs inline): robust to other load
            t0 = time.process_time()
        run_recipe(recipe, only=None if i == 0 else "quality", force=i > 0, progress=False)
        if i > 0:
            cpu.append(round(time.process_time() - t0, 3))
        report = json.loads((work / "run" / "pipeline_report.json").read_text())
        section = next(s for s in report["stages"] if s["stage"] == "quality")
        seconds.append(section["seconds"])
    out = {}
    for part in sorted((work / "run" / "quality").glob("**/part-*.parquet")):
        kept = "rejected" not in part.parts
        t = pq.read_table(part)
        cols = [c for c in t.column_names if c.startswith("quality") or c in LM_COLS]
        for rec in t.select(["id", *cols]).to_pylist():
            out[rec.pop("id")] = {**rec, "kept": kept}
    stats = dict(section["stats"], seconds_median=statistics.median(seconds), seconds=seconds)
    stats["cpu_seconds"] = cpu
    return out, stats


def table(rows: list[dict], scored: dict) -> dict:
    """Per source / junk kind: docs, reached quality (passed clean), kept by quality."""
    out: dict[str, dict] = {}
    for i, r in enumerate(rows):
        d = out.setdefault(r["kind"], {"docs": 0, "reached": 0, "kept": 0, "scores": [], "ppl": []})
        d["docs"] += 1
        s = scored.get(f"doc{i}")
        if s is not None:
            d["reached"] += 1
            d["kept"] += int(s["kept"])
            d["scores"].append(s["quality"])
            d["ppl"].append(s.get("perplexity"))
    for d in out.values():
        sc = d.pop("scores")
        ppl = [p for p in d.pop("ppl") if p is not None and p == p]
        d["median_perplexity"] = round(float(np.median(ppl)), 1) if ppl else None
        d["kept_share"] = round(d["kept"] / d["reached"], 4) if d["reached"] else None
        d["median_quality"] = round(float(np.median(sc)), 3) if sc else None
    return dict(sorted(out.items()))


def aucs(rows: list[dict], scored: dict, column: str) -> dict | None:
    """ROC-AUC of `column` over documents that reached quality: real vs target junk, real vs
    each junk kind, Wikipedia vs target junk."""
    ids = [i for i in range(len(rows)) if f"doc{i}" in scored]
    if ids and column not in scored[f"doc{ids[0]}"]:
        return None  # a score the run did not compute (e.g. coherence with score: classifier)
    s = np.array([scored[f"doc{i}"][column] for i in ids], np.float64)
    s = np.nan_to_num(s, nan=-1.0)
    kind = np.array([rows[i]["kind"] for i in ids])
    real = np.char.startswith(kind.astype(str), "real:")
    target = real | np.isin(kind, [f"junk:{k}" for k in JUNK])
    out = {"all_target_junk": roc_auc(s[target], real[target])}
    wiki = kind == "real:wikitext"
    junk_t = target & ~real
    out["wikitext_vs_target_junk"] = roc_auc(s[wiki | junk_t], wiki[wiki | junk_t])
    for k in JUNK + NOT_TARGET:
        m = real | (kind == f"junk:{k}")
        out[k] = roc_auc(s[m], real[m])
    return {k: None if v is None else round(v, 4) for k, v in out.items()}


def summary(tab: dict) -> dict:
    real = [v for k, v in tab.items() if k.startswith("real:")]
    junk = [v for k, v in tab.items() if k[5:] in JUNK]

    def share(group: list[dict], key: str) -> float | None:
        reached = sum(v["reached"] for v in group)
        return round(sum(v[key] for v in group) / reached, 4) if reached else None

    kept_junk = share(junk, "kept")
    return {
        "real_kept_share": share(real, "kept"),
        "target_junk_dropped_share": None if kept_junk is None else round(1 - kept_junk, 4),
    }


def script_run(texts: dict[str, list[str]], work: Path, quality: dict | None = None) -> dict:
    """One language alone: its real documents plus junk made from them (OTHER_LANG_JUNK)."""
    rows = []
    for k, docs in texts.items():
        for r in with_junk(docs, seed=1):
            rows.append({**r, "kind": f"real:{k}" if r["label"] else r["kind"]})
    scored, stats = run(rows, work, quality or {})
    tab = table(rows, scored)
    return {
        "table": tab,
        **summary(tab),
        "auc_quality": aucs(rows, scored, "quality"),
        "per_script": stats.get("per_script"),
        "lm": _lm(stats),
    }


def _lm(stats: dict) -> dict:
    lm = stats.get("lm", {})
    keep = ("status", "why", "reference", "reference_docs", "reference_docs_per_script")
    return {k: lm[k] for k in keep if k in lm}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--max-per-source", type=int, default=600)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="150 docs per source, 1 repeat")
    ap.add_argument(
        "--quality",
        default="{}",
        help="JSON overrides of the quality config (every run but the peer)",
    )
    ap.add_argument("--only-default", action="store_true", help="skip peers and other corpora")
    ap.add_argument(
        "--out", type=Path, default=ROOT / "outputs" / "benchmarks" / "quality_real.json"
    )
    args = ap.parse_args()
    if args.quick:
        args.max_per_source, args.repeats = 150, 1
    rows = build_set(args.max_per_source, seed=0)
    result: dict = {"docs": len(rows), "mb": round(sum(len(r["text"]) for r in rows) / 1e6, 2)}
    with tempfile.TemporaryDirectory(prefix="bench-quality-real-") as tmp:
        tmp = Path(tmp)
        overrides = json.loads(args.quality)
        scored, stats = run(rows, tmp / "default", overrides, args.repeats)
        tab = table(rows, scored)
        result["default"] = {
            "table": tab,
            **summary(tab),
            "auc_quality": aucs(rows, scored, "quality"),
            "auc_coherence": aucs(rows, scored, "quality_coherence"),
            "auc_heuristic": aucs(rows, scored, "quality_heuristic"),
            "docs_reaching_quality": stats["docs_in"],
            "seconds_median": stats["seconds_median"],
            "seconds": stats["seconds"],
            "docs_per_s": round(stats["docs_in"] / stats["seconds_median"], 1),
            "cpu_seconds": stats["cpu_seconds"],
            "docs_per_cpu_s": round(stats["docs_in"] / statistics.median(stats["cpu_seconds"]), 1)
            if stats["cpu_seconds"]
            else None,
            "lm": stats.get("lm"),
            "perplexity_histogram": stats.get("perplexity_histogram"),
            "per_script": stats.get("per_script"),
        }
        if args.only_default:
            print(json.dumps({k: result["default"][k] for k in ("table", "auc_quality")}, indent=1))
            return
        old, old_stats = run(rows, tmp / "old", {"score": "mean"})
        old_tab = table(rows, old)
        result["peer_previous_default_mean"] = {
            "table": old_tab,
            **summary(old_tab),
            "auc_quality": aucs(rows, old, "quality"),
            "seconds": old_stats["seconds_median"],
        }
        zh, ru = chinese(args.max_per_source // 2), russian(args.max_per_source // 2)
        result["chinese_alone"] = script_run({"zh": zh}, tmp / "zh", overrides)
        result["russian_alone"] = script_run({"ru": ru}, tmp / "ru", overrides)
        mixed = rows + [{"text": t, "label": 1, "kind": "real:zh"} for t in zh[:100]]
        mixed += [{"text": t, "label": 1, "kind": "real:ru"} for t in ru[:100]]
        m_scored, m_stats = run(mixed, tmp / "mixed", overrides)
        m_tab = table(mixed, m_scored)
        result["mixed_with_100_zh_100_ru"] = {
            "table": {k: v for k, v in m_tab.items() if k in ("real:zh", "real:ru")},
            **summary(m_tab),
            "per_script": m_stats.get("per_script"),
        }
        junk_only = [r for r in rows if r["label"] == 0 and r["kind"][5:] in JUNK]
        j_scored, j_stats = run(junk_only, tmp / "junk", {})
        result["all_junk_corpus"] = {
            "table": table(junk_only, j_scored),
            "docs_in": j_stats["docs_in"],
            "docs_out": j_stats["docs_out"],
            "lm": _lm(j_stats),
        }
    out = args.out
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    brief = {k: result["default"][k] for k in ("real_kept_share", "target_junk_dropped_share")}
    print(json.dumps({"default": brief, "auc": result["default"]["auc_quality"]}, indent=2))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
