"""Language identification on real corpora (issue 24): py3langid vs lingua-language-detector.

Labelled sets, cut from /work/shared/corpora as bench_clean_real.py cuts them (a story, an
article, a review, a web page): English (WikiText raw, Reuters, TinyStories, C4, CCNet head,
Shakespeare), Russian (TinyStories-ru), Chinese (hotel and delivery reviews, CMRC Wikipedia).
The corpora hold no Latin-language file; the "latin" set is the Latin-script, non-English pages
of the unfiltered Common Crawl sample, labelled by their country domain (.it -> it, .de -> de,
...): a noisy label (an .it site may write English), so its accuracy is a lower bound; the
detectors' agreement on all 697 pages of that dump is reported too. Every set is measured on
whole documents and on short texts: each document's first <= 100 characters, cut at a space.

Speed: documents per CPU-second (process_time) over the same documents for each detector, one
process, the first LANG_MAX_CHARS characters read as clean reads them; lingua in its high- and
low-accuracy modes, all its languages loaded (as our py3langid wrapper keeps all 142 classes).
Writes outputs/benchmarks/langid.json.
Run: .venv/bin/python benchmarks/bench_langid.py [--max-docs 300]
"""

from __future__ import annotations

import argparse
import gzip
import json
import resource
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_clean_real import CORPORA, load_sources  # noqa: E402
from pipeline.clean import langid  # noqa: E402

LABELS = {
    "en": ("wikitext2_raw", "reuters", "tinystories", "c4", "ccnet_head", "shakespeare"),
    "ru": ("tinystories_ru",),
    "zh": ("zh_hotel_reviews", "zh_waimai_reviews", "zh_cmrc_wiki"),
}
TLD_LANG = {
    "it": "it",
    "de": "de",
    "fr": "fr",
    "es": "es",
    "nl": "nl",
    "br": "pt",
    "pt": "pt",
    "ro": "ro",
    "cz": "cs",
    "pl": "pl",
    "se": "sv",
    "hr": "hr",
    "tr": "tr",
    "cat": "ca",
}
SHORT_CHARS = 100
MIN_LANG_SCORE = 0.65  # clean.min_lang_score's default


def short(text: str) -> str:
    """The first <= 100 characters, cut at the last space (CJK: at 100 characters)."""
    text = " ".join(text.split())
    if len(text) <= SHORT_CHARS:
        return text
    cut = text[:SHORT_CHARS]
    return cut.rsplit(" ", 1)[0] if " " in cut[SHORT_CHARS // 2 :] else cut


def latin_pages() -> list[tuple[str, str]]:
    """(text, TLD language) of the CC dump's pages on a country domain, and all its texts."""
    path = next((CORPORA / "dolma_cc_web").glob("CC-MAIN-*.jsonl.gz"))
    out = []
    for line in gzip.open(path, "rt", encoding="utf-8"):
        rec = json.loads(line)
        tld = rec["metadata"]["url"].split("/")[0].rsplit(".", 1)[-1]
        if tld in TLD_LANG and rec["text"].strip():
            out.append((rec["text"], TLD_LANG[tld]))
    return out


def labelled_sets(max_docs: int) -> dict[str, list[tuple[str, str]]]:
    src = load_sources()
    rng = np.random.default_rng(0)
    sets: dict[str, list[tuple[str, str]]] = {}
    for lang, names in LABELS.items():
        docs = [d for n in names for d in src[n] if d.strip()]
        pick = rng.permutation(len(docs))[:max_docs]
        sets[lang] = [(docs[i], lang) for i in sorted(pick)]
    sets["latin"] = latin_pages()
    return sets


class Py3:
    name = "py3langid"

    def __init__(self) -> None:
        self.m = langid.model()

    def __call__(self, text: str) -> str:
        return self.m.score(text)[0]


class Lingua:
    def __init__(self, low: bool) -> None:
        from lingua import LanguageDetectorBuilder

        b = LanguageDetectorBuilder.from_all_languages()
        self.d = (b.with_low_accuracy_mode() if low else b).build()
        self.name = "lingua_low_accuracy" if low else "lingua"

    def __call__(self, text: str) -> str:
        lang = self.d.detect_language_of(text[: langid.LANG_MAX_CHARS])
        return "und" if lang is None else lang.iso_code_639_1.name.lower()


def accuracy(det, pairs: list[tuple[str, str]]) -> dict:
    full = [det(t) == lab for t, lab in pairs]
    sh = [det(short(t)) == lab for t, lab in pairs]
    return {
        "docs": len(pairs),
        "accuracy": round(float(np.mean(full)), 4),
        "accuracy_short": round(float(np.mean(sh)), 4),
    }


def speed(det, texts: list[str], repeats: int = 3) -> dict:
    times = []
    for _ in range(repeats):
        t0 = time.process_time()
        for t in texts:
            det(t)
        times.append(time.process_time() - t0)
    cpu = float(np.median(times))
    chars = sum(min(len(t), langid.LANG_MAX_CHARS) for t in texts)
    return {
        "docs_per_cpu_s": round(len(texts) / cpu, 1),
        "chars_read_per_cpu_s": round(chars / cpu),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--max-docs", type=int, default=300, help="per labelled language")
    args = ap.parse_args()
    sets = labelled_sets(args.max_docs)
    all_cc = [t for t, _ in latin_pages()]
    speed_texts = [t for pairs in sets.values() for t, _ in pairs]
    out: dict = {
        "lang_max_chars": langid.LANG_MAX_CHARS,
        "short_chars": SHORT_CHARS,
        "sets": {k: len(v) for k, v in sets.items()},
        "detectors": {},
    }
    labels = {}
    for make in (Py3, lambda: Lingua(False), lambda: Lingua(True)):
        rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        t0 = time.process_time()
        det = make()
        det("warm up the model: this text is English.")
        load_s = time.process_time() - t0
        res = {lang: accuracy(det, pairs) for lang, pairs in sets.items()}
        res["speed"] = speed(det, speed_texts)
        res["load_cpu_s"] = round(load_s, 2)
        res["peak_rss_growth_mb"] = round(
            (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss0) / 1024
        )
        labels[det.name] = [det(t) for t in all_cc]
        out["detectors"][det.name] = res
        print(det.name, json.dumps(res), flush=True)
    a, b = labels["py3langid"], labels["lingua"]
    out["cc_dump_agreement_py3langid_lingua"] = round(
        float(np.mean([x == y for x, y in zip(a, b, strict=True)])), 4
    )
    # py3langid reading more or fewer characters: does LANG_MAX_CHARS cost accuracy?
    m = langid.model()
    # what clean.min_lang_score's default keeps: right language and score >= 0.65
    kept = {}
    for lang, pairs in sets.items():
        for name, texts in (
            ("full", [t for t, _ in pairs]),
            ("short", [short(t) for t, _ in pairs]),
        ):
            got = [m.score(t) for t in texts]
            ok = [
                g[0] == lab and g[1] >= MIN_LANG_SCORE
                for g, (_, lab) in zip(got, pairs, strict=True)
            ]
            right = [g[1] for g, (_, lab) in zip(got, pairs, strict=True) if g[0] == lab]
            kept[f"{lang}_{name}"] = {
                "kept_frac": round(float(np.mean(ok)), 4),
                "score_p10_when_right": round(float(np.quantile(right, 0.1)), 3) if right else None,
            }
    out["py3langid_kept_at_min_lang_score"] = {"min_lang_score": MIN_LANG_SCORE, **kept}
    cut = {}
    for n in (300, 1000, 2000, 100_000):
        ok = [m.score(t, n)[0] == lab for pairs in sets.values() for t, lab in pairs]
        cut[str(n)] = round(float(np.mean(ok)), 4)
    out["py3langid_accuracy_by_chars_read"] = cut
    dest = ROOT / "outputs" / "benchmarks" / "langid.json"
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
