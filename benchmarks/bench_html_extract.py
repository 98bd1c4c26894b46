"""HTML extraction and WARC reading: quality and speed of resiliparse, trafilatura and the
built-in tag stripper (pipeline.sources.html), and of warcio vs our WARC framing.

Quality, on pages this script builds (so the main text is known): each page holds 6-12
paragraphs of prose (sentences from /work/shared/corpora's c4_sample when present, else
templated ones) inside typical boilerplate: a nav menu, a sidebar of links, a cookie banner,
a comment form, a footer, scripts and styles. Per extractor: main-sentence recall (share of the
page's sentences found whole in the output), boilerplate leakage (share of boilerplate phrases
found), CPU ms per page. Speed on real HTML: the 24 pages of dolma's sample-0000.warc.gz, and
the framing readers' CPU time on that file. CPU-time medians over interleaved repeats.
Writes outputs/benchmarks/html_extract.json.
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import re
import statistics
import time
from pathlib import Path

from pipeline.sources import html, warc

CORPORA = Path("/work/shared/corpora")
WARC = CORPORA / "dolma_cc_web" / "sample-0000.warc.gz"
OUT = Path(__file__).resolve().parents[1] / "outputs" / "benchmarks" / "html_extract.json"
BOILER = [
    "Home",
    "About us",
    "Contact",
    "Subscribe to our newsletter",
    "We use cookies to improve your experience",
    "Accept all cookies",
    "Related articles",
    "Most popular this week",
    "Leave a comment",
    "Your email address will not be published",
    "Copyright 2024 Example Media Group",
    "Privacy policy",
    "Terms of service",
    "Follow us on social media",
]


def sentences() -> list[str]:
    out = []
    for p in sorted((CORPORA / "c4_sample").glob("*.json.gz")):
        for line in gzip.open(p, "rt", encoding="utf-8"):
            text = json.loads(line)["text"]
            out += [s for s in re.split(r"(?<=[.!?])\s+", text) if 40 <= len(s) <= 240]
    if out:
        return out
    words = "the farmer river bridge teacher garden window market letter village".split()
    rng = random.Random(0)
    return [" ".join(rng.choice(words) for _ in range(14)).capitalize() + "." for _ in range(2000)]


def page(rng: random.Random, pool: list[str]) -> tuple[str, list[str]]:
    paras = [
        [rng.choice(pool) for _ in range(rng.randint(2, 4))] for _ in range(rng.randint(6, 12))
    ]
    nav = "".join(f'<li><a href="/{b}">{b}</a></li>' for b in BOILER[:3])
    side = "".join(f'<li><a href="/p{i}">{BOILER[6 + i % 2]} {i}</a></li>' for i in range(8))
    body = "".join(f"<p>{' '.join(p)}</p>" for p in paras)
    doc = (
        "<!DOCTYPE html><html><head><title>Story</title><style>.x{color:red}</style>"
        "<script>window.dataLayer=[];function track(){}</script></head><body>"
        f'<header><nav><ul>{nav}</ul></nav><div class="cookie">{BOILER[4]} '
        f"<button>{BOILER[5]}</button></div></header>"
        f'<div class="layout"><article><h1>{paras[0][0][:60]}</h1>{body}</article>'
        f"<aside><h3>{BOILER[7]}</h3><ul>{side}</ul></aside></div>"
        f'<section class="comments"><h3>{BOILER[8]}</h3><p>{BOILER[9]}</p><form>'
        '<input name="email"><textarea></textarea></form></section>'
        f"<footer><p>{BOILER[3]}</p><p>{BOILER[12]}</p><p>{BOILER[10]}</p>"
        f"<p>{BOILER[11]} | {BOILER[13]}</p></footer></body></html>"
    )
    return doc, [s for p in paras for s in p]


def quality(name: str, pages: list[tuple[str, list[str]]]) -> dict:
    found = total = leaked = 0
    for doc, sents in pages:
        text = " ".join(html.extract_text(doc, name).split())
        found += sum(" ".join(s.split()) in text for s in sents)
        total += len(sents)
        leaked += sum(b in text for b in BOILER)
    return {
        "main_sentence_recall": round(found / total, 4),
        "boilerplate_leak": round(leaked / (len(BOILER) * len(pages)), 4),
    }


def cpu_ms(fn, items, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t = time.process_time()
        for x in items:
            fn(x)
        times.append((time.process_time() - t) * 1000 / len(items))
    return round(statistics.median(times), 3)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pages", type=int, default=200)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    rng = random.Random(7)
    pool = sentences()
    pages = [page(rng, pool) for _ in range(args.pages)]
    names = [n for n in ("resiliparse", "trafilatura", "tags") if html.available(n)]
    real = []
    if WARC.is_file():
        for rec in warc.iter_file(WARC, False):
            if isinstance(rec, warc.WarcRecord) and rec.headers.get("warc-type") == "response":
                _, headers, body = warc.parse_http(rec.block)
                if "html" in headers.get("content-type", ""):
                    real.append(html.decode(body, headers.get("content-type")))
    result: dict = {"pages": args.pages, "real_pages": len(real), "extractors": {}}
    for name in names:
        result["extractors"][name] = quality(name, pages)
    # interleaved repeats: each round times every extractor once
    synth: dict[str, list[float]] = {n: [] for n in names}
    on_real: dict[str, list[float]] = {n: [] for n in names}
    for _ in range(args.repeats):
        for n in names:
            synth[n].append(cpu_ms(lambda d, n=n: html.extract_text(d[0], n), pages, 1))
            if real:
                on_real[n].append(cpu_ms(lambda d, n=n: html.extract_text(d, n), real, 1))
    for n in names:
        result["extractors"][n]["cpu_ms_per_page"] = statistics.median(synth[n])
        if real:
            result["extractors"][n]["cpu_ms_per_real_page"] = statistics.median(on_real[n])
            chars = sum(len(html.extract_text(d, n)) for d in real)
            result["extractors"][n]["real_chars_out"] = chars
    if WARC.is_file():
        readers = (
            {"warcio": True, "builtin": False} if warc.warcio_available() else {"builtin": False}
        )
        times: dict[str, list[float]] = {r: [] for r in readers}
        for _ in range(args.repeats):
            for r, use in readers.items():
                t = time.process_time()
                n_rec = sum(1 for _ in warc.iter_file(WARC, use))
                times[r].append((time.process_time() - t) * 1000)
        size = WARC.stat().st_size
        result["warc_readers"] = {
            r: {
                "records": n_rec,
                "cpu_ms_file": round(statistics.median(t), 2),
                "mb_per_s_compressed": round(size / 1e6 / (statistics.median(t) / 1000), 1),
            }
            for r, t in times.items()
        }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
