"""Quality benchmark: ROC-AUC of heuristic vs self-trained classifier (alone and with a labelled
seed set) at separating real documents (/work/shared/corpora) from junk made from them, side by
side with the Gopher and FineWeb rule sets (reimplemented from their published thresholds), plus
throughput. Writes outputs/benchmarks/quality.json. Run: .venv/bin/python
benchmarks/bench_quality.py [--quick]"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from pipeline.clean.textstats import find_duplicates  # noqa: E402
from pipeline.quality.features import (  # noqa: E402
    DEFAULT_BIAS,
    DEFAULT_WEIGHTS,
    heuristic_score,
    stats_matrix,
)
from pipeline.quality.logreg import roc_auc  # noqa: E402
from pipeline.recipe import build_recipe  # noqa: E402
from pipeline.run.runner import run_recipe  # noqa: E402

CORPORA = Path("/work/shared/corpora")
JUNK_KINDS = ("shuffled", "keyword_spam", "boilerplate", "repetition")
BOILERPLATE = [
    "Home | About Us | Contact | Blog | Login | Register",
    "Skip to main content",
    "This website uses cookies to improve your experience. Accept",
    "Privacy Policy | Terms of Use",
    "Copyright © 2019 All rights reserved.",
    "Share on Facebook Share on Twitter Pin it",
    "Subscribe to our newsletter",
    "Previous post Next post",
    "Powered by WordPress",
    "Search for:",
    "Categories Archives Tags",
    "Leave a Reply Cancel reply",
    "Your email address will not be published. Required fields are marked *",
    "Posted in Uncategorized | 3 Comments",
    "Read more »",
    "Click here to download",
    "Add to cart",
    "Sign up for free",
    "Follow us on Instagram",
    "Back to top",
]


def _jsonl(path: Path, field: str = "text") -> list[str]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        return [json.loads(line)[field] for line in f if line.strip()]


def load_real(max_per_source: int) -> dict[str, list[str]]:
    """Real documents per source (>= 50 words each, so length alone separates nothing)."""
    out: dict[str, list[str]] = {}
    out["c4"] = [t for p in sorted((CORPORA / "c4_sample").glob("*.json.gz")) for t in _jsonl(p)]
    out["ccnet_head"] = [
        t for p in sorted((CORPORA / "dolma_cc_web").glob("cc_en_head-*.jsonl")) for t in _jsonl(p)
    ]
    raw = (CORPORA / "wikitext-2-raw" / "wiki.test.raw").read_text(encoding="utf-8")
    out["wikitext"] = [a.strip() for a in re.split(r"\r?\n = (?!=)[^\n]* = \r?\n", raw)]
    stories = (CORPORA / "tinystories" / "tinystories_sample.txt").read_text(encoding="utf-8")
    out["tinystories"] = [s.strip() for s in stories.split("<|endoftext|>")][:-1]
    bodies = []
    for p in sorted((CORPORA / "reuters21578").glob("*.sgm")):
        text = p.read_text(encoding="utf-8", errors="replace")
        bodies += [re.sub(r"&#\d+;", "", b) for b in re.findall(r"<BODY>(.*?)</BODY>", text, re.S)]
    out["reuters"] = bodies
    return {k: [t for t in v if len(t.split()) >= 50][:max_per_source] for k, v in out.items()}


def make_junk(kind: str, real: str, rng: np.random.Generator) -> str:
    words = real.split()
    if kind == "shuffled":  # word salad: same words, same statistics, no syntax
        rng.shuffle(words)
        return " ".join(words)
    if kind == "keyword_spam":  # a few of the document's own longer words, repeated
        long = sorted({w.strip(".,;:!?\"'()").lower() for w in words if len(w) > 5}) or ["buy"]
        keys = [long[int(i)] for i in rng.integers(len(long), size=6)]
        return " ".join(keys[int(i)] for i in rng.integers(6, size=max(80, len(words))))
    if kind == "boilerplate":  # navigation and footer lines around one sentence of the document
        lines = [BOILERPLATE[int(i)] for i in rng.integers(len(BOILERPLATE), size=25)]
        lines.insert(int(rng.integers(25)), " ".join(words[:20]))
        return "\n".join(lines)
    # machine-like repetition: one templated line with a counter, many times
    line = " ".join(words[:12])
    return "\n".join(f"{line} item {i} of {40}" for i in range(int(rng.integers(20, 60))))


def build_set(max_per_source: int, seed: int) -> tuple[list[str], np.ndarray, list[str]]:
    """Real docs (label 1) + one junk doc per 3 real docs, kinds in rotation (label 0)."""
    rng = np.random.default_rng(seed)
    texts, labels, kinds = [], [], []
    for source, docs in load_real(max_per_source).items():
        for i, doc in enumerate(docs):
            texts.append(doc)
            labels.append(1)
            kinds.append(f"real:{source}")
            if i % 3 == 0:
                kind = JUNK_KINDS[(i // 3) % len(JUNK_KINDS)]
                texts.append(make_junk(kind, doc, rng))
                labels.append(0)
                kinds.append(f"junk:{kind}")
    return texts, np.array(labels), kinds


# ---------------------------------------------------------------- peers: published rule sets

GOPHER_STOP = {"the", "be", "to", "of", "and", "that", "have", "with"}
_WORD = re.compile(r"\w+")


def _dup_fraction(items: list[str]) -> tuple[float, float]:
    """(share of items that repeat an earlier one, share of their characters)."""
    dup, dup_chars = find_duplicates(items)
    return dup / max(len(items), 1), dup_chars / (sum(map(len, items)) or 1)


def _ngram_fractions(words: list[str]) -> list[bool]:
    """Gopher's top n-gram (2-4) and duplicated n-gram (5-10) character-fraction rules."""
    fails, total = [], sum(map(len, words)) or 1
    for n, limit in ((2, 0.20), (3, 0.18), (4, 0.16)):
        grams = [" ".join(words[i : i + n]) for i in range(len(words) - n + 1)]
        if grams:
            top, count = max(((g, c) for g, c in _counts(grams).items()), key=lambda x: x[1])
            fails.append(count > 1 and len(top.replace(" ", "")) * count / total > limit)
    for n, limit in zip(range(5, 11), (0.15, 0.14, 0.13, 0.12, 0.11, 0.10), strict=True):
        counts = _counts([" ".join(words[i : i + n]) for i in range(len(words) - n + 1)])
        covered = np.zeros(len(words), bool)
        for i in range(len(words) - n + 1):
            if counts[" ".join(words[i : i + n])] > 1:
                covered[i : i + n] = True
        fails.append(sum(len(w) for w, c in zip(words, covered, strict=True) if c) / total > limit)
    return fails


def _counts(items: list[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for it in items:
        out[it] = out.get(it, 0) + 1
    return out


def gopher_failures(text: str) -> int:
    """Number of Gopher quality + repetition rules (Rae et al. 2021, Table A1) a document fails."""
    words = text.split()
    alpha = [w for w in words if any(c.isalpha() for c in w)]
    lines = [ln for ln in text.split("\n") if ln.strip()]
    paras = [p for p in re.split(r"\n{2,}", text) if p.strip()]
    mean_len = sum(map(len, words)) / max(len(words), 1)
    fails = [
        not 50 <= len(words) <= 100_000,
        not 3 <= mean_len <= 10,
        (text.count("#") + text.count("...") + text.count("…")) / max(len(words), 1) > 0.1,
        sum(ln.lstrip().startswith(("•", "-")) for ln in lines) / max(len(lines), 1) > 0.9,
        sum(ln.rstrip().endswith(("...", "…")) for ln in lines) / max(len(lines), 1) > 0.3,
        len(alpha) / max(len(words), 1) < 0.8,
        len({w.lower() for w in _WORD.findall(text)} & GOPHER_STOP) < 2,
    ]
    line_dup, line_chars = _dup_fraction(lines)
    para_dup, para_chars = _dup_fraction(paras)
    fails += [line_dup > 0.3, para_dup > 0.3, line_chars > 0.2, para_chars > 0.2]
    return sum(fails) + sum(_ngram_fractions(_WORD.findall(text.lower())[:5000]))


def fineweb_failures(text: str) -> int:
    """Number of datatrove FineWebQualityFilter rules a document fails (defaults)."""
    lines = [ln.strip() for ln in text.split("\n") if ln.strip()]
    if not lines:
        return 4
    words = text.split()
    punct = sum(ln.endswith((".", "!", "?", '"', "'")) for ln in lines) / len(lines)
    short = sum(len(ln) <= 30 for ln in lines) / len(lines)
    _, dup_chars = _dup_fraction(lines)
    return sum(
        [punct < 0.12, short > 0.67, dup_chars > 0.01, text.count("\n") / max(len(words), 1) > 0.3]
    )


# ---------------------------------------------------------------- measurement


def per_kind_auc(scores: np.ndarray, labels: np.ndarray, kinds: list[str]) -> dict[str, float]:
    kinds_arr = np.array(kinds)
    out = {"all": round(roc_auc(scores, labels == 1), 4)}
    for kind in JUNK_KINDS:
        m = (labels == 1) | (kinds_arr == f"junk:{kind}")
        out[kind] = round(roc_auc(scores[m], labels[m] == 1), 4)
    return out


def seed_set(max_per_source: int, per_source: int, seed: int) -> list[dict]:
    """Labelled examples disjoint from the benchmark set: `per_source` more TinyStories and
    Reuters documents (good) and one junk document made from each (bad, kinds in rotation)."""
    rng = np.random.default_rng(seed + 1)
    real = load_real(max_per_source + per_source)
    out = []
    for source in ("tinystories", "reuters"):
        for i, doc in enumerate(real[source][max_per_source:]):
            out.append({"text": doc, "label": "good"})
            junk = make_junk(JUNK_KINDS[i % len(JUNK_KINDS)], doc, rng)
            out.append({"text": junk, "label": "bad"})
    return out


def run_stage(
    texts: list[str], work: Path, workers: int, repeats: int, seeds: list[dict] | None = None
) -> tuple[dict, dict]:
    """Run download (jsonl) + quality through the real runner; quality scores by id and the
    median stage throughput over `repeats` forced runs. `seeds`: a labelled seed set."""
    work.mkdir(parents=True, exist_ok=True)
    src = work / "mixed.jsonl"
    src.write_text(
        "".join(json.dumps({"id": f"doc{i}", "text": t}) + "\n" for i, t in enumerate(texts)),
        encoding="utf-8",
    )
    raw = {
        "name": "bench",
        "seed": 0,
        "out_dir": str(work / "run"),
        "workers": workers,
        "download": {"source": "jsonl", "path": str(src), "docs_per_part": 500},
        "quality": {"score": "classifier"},
    }
    if seeds:
        path = work / "seed.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in seeds), encoding="utf-8")
        raw["quality"]["seed_set_path"] = str(path)
    recipe = build_recipe(raw)
    seconds = []
    for i in range(repeats):
        run_recipe(recipe, only=None if i == 0 else "quality", force=i > 0, progress=False)
        report = json.loads((work / "run" / "pipeline_report.json").read_text())
        section = next(s for s in report["stages"] if s["stage"] == "quality")
        seconds.append(section["seconds"])
    import pyarrow.parquet as pq

    scores = {}
    for part in sorted((work / "run" / "quality").glob("**/part-*.parquet")):
        t = pq.read_table(part, columns=["id", "quality"])
        scores.update(zip(t.column("id").to_pylist(), t.column("quality").to_pylist(), strict=True))
    stats = section["stats"]
    median = statistics.median(seconds)
    mb = stats["bytes_in"] / 1e6
    return scores, {
        "seconds_median": round(median, 3),
        "seconds_all": seconds,
        "docs_per_s": round(len(texts) / median, 1),
        "mb_per_s": round(mb / median, 3),
        "classifier": stats["classifier"],
        "docs_out": stats["docs_out"],
        "dropped_low_quality": stats["dropped_low_quality"],
    }


def timed(fn, texts: list[str], repeats: int) -> tuple[np.ndarray, float]:
    times, out = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = np.array([fn(t) for t in texts], np.float64)
        times.append(time.perf_counter() - t0)
    return out, statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--max-per-source", type=int, default=600)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--seed-docs", type=int, default=100, help="good docs per seed-set source")
    ap.add_argument("--quick", action="store_true", help="100 docs per source, 1 repeat")
    args = ap.parse_args()
    if args.quick:
        args.max_per_source, args.repeats = 100, 1
    texts, labels, kinds = build_set(args.max_per_source, seed=0)
    mb = sum(len(t.encode()) for t in texts) / 1e6
    import tempfile

    with tempfile.TemporaryDirectory(prefix="bench-quality-") as tmp:
        by_id, stage = run_stage(texts, Path(tmp), args.workers, args.repeats)
        seeds = seed_set(args.max_per_source, args.seed_docs, seed=0)
        seeded_id, seeded = run_stage(texts, Path(tmp) / "seeded", args.workers, 1, seeds)
    classifier = np.array([by_id[f"doc{i}"] for i in range(len(texts))], np.float64)
    with_seeds = np.array([seeded_id[f"doc{i}"] for i in range(len(texts))], np.float64)

    def heuristic(batch: list[str]) -> np.ndarray:
        return heuristic_score(stats_matrix(batch, 100_000), DEFAULT_WEIGHTS, DEFAULT_BIAS)

    times = []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        heur = heuristic(texts)
        times.append(time.perf_counter() - t0)
    heur_s = statistics.median(times)
    gopher, gopher_s = timed(gopher_failures, texts, args.repeats)
    fineweb, fineweb_s = timed(fineweb_failures, texts, args.repeats)
    auc = {
        "classifier (stage)": per_kind_auc(classifier, labels, kinds),
        "mean of both (stage default)": per_kind_auc((classifier + heur) / 2, labels, kinds),
        f"classifier + seed set ({len(seeds)} labelled)": per_kind_auc(with_seeds, labels, kinds),
        "mean, classifier with seed set": per_kind_auc((with_seeds + heur) / 2, labels, kinds),
        "heuristic": per_kind_auc(heur, labels, kinds),
        "peer gopher rules": per_kind_auc(-gopher, labels, kinds),
        "peer fineweb rules": per_kind_auc(-fineweb, labels, kinds),
    }
    result = {
        "set": {
            "docs": len(texts),
            "real": int(labels.sum()),
            "junk": int((labels == 0).sum()),
            "mb": round(mb, 3),
            "sources": dict(sorted(_counts(kinds).items())),
        },
        "roc_auc": auc,
        "auc_ratio_classifier_vs_heuristic": round(
            auc["classifier (stage)"]["all"] / auc["heuristic"]["all"], 4
        ),
        "stage": stage,
        "stage_with_seed_set_classifier": seeded["classifier"],
        "scoring_docs_per_s": {
            "heuristic only": round(len(texts) / heur_s, 1),
            "peer gopher rules": round(len(texts) / gopher_s, 1),
            "peer fineweb rules": round(len(texts) / fineweb_s, 1),
            "stage end to end (stats+train+score+write)": stage["docs_per_s"],
        },
        "repeats": args.repeats,
        "workers": args.workers,
    }
    out = ROOT / "outputs" / "benchmarks" / "quality.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
