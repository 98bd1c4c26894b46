"""Bytes per token of our byte-level BPE by vocabulary size, on Chinese and on English text
from /work/shared/corpora: where the tokenize report's healthy ranges come from
(pipeline.tokenizer.health; docs/tokenizer.md).

Chinese: CMRC 2018 contexts (Wikipedia) and the ChnSentiCorp / waimai reviews; English:
TinyStories and WikiText-2 raw. Each corpus is split 90/10 by a seeded shuffle, a BPE is
trained on up to 1 MB of the 90% (the tokenize stage's code: pre-tokenizer, word counts,
train_bpe) and bytes/token (UTF-8 bytes over tokens, no EOS) measured on up to 200 KB of the
held-out 10%, per vocabulary size.
Writes outputs/benchmarks/bytes_per_token.json.
"""

from __future__ import annotations

import argparse
import csv
import json
import time
from pathlib import Path

import numpy as np

from pipeline.tokenizer.bpe import DEFAULT_SPECIALS, Tokenizer
from pipeline.tokenizer.health import LATIN_RANGE, UNSPACED_RANGE, dominant_script
from pipeline.tokenizer.pretokenize import compile_pattern, special_splitter
from pipeline.tokenizer.train import train_bpe
from pipeline.tokenizer.wordcount import count_words

CORPORA = Path("/work/shared/corpora")
OUT = Path(__file__).resolve().parents[1] / "outputs" / "benchmarks" / "bytes_per_token.json"
VOCABS = (512, 1024, 2048, 4096, 8192)
TRAIN_BYTES, HELD_BYTES = 1_000_000, 200_000  # caps: pure-Python BPE training and encoding


def chinese() -> list[str]:
    docs = []
    for name in ("cmrc2018_dev.json", "cmrc2018_trial.json"):
        data = json.loads((CORPORA / "cmrc2018_zh" / name).read_text(encoding="utf-8"))
        docs += [p["context"] for a in data["data"] for p in a["paragraphs"]]
    for name in ("ChnSentiCorp_htl_all.csv", "waimai_10k.csv"):
        with open(CORPORA / "chinese_reviews" / name, encoding="utf-8") as f:
            docs += [row["review"] for row in csv.DictReader(f) if row.get("review")]
    return docs


def english() -> list[str]:
    raw = (CORPORA / "tinystories" / "tinystories_sample.txt").read_text(encoding="utf-8")
    docs = [t.strip() for t in raw.split("<|endoftext|>") if t.strip()]
    wiki = (CORPORA / "wikitext-2-raw" / "wiki.test.raw").read_text(encoding="utf-8")
    docs += [p.strip() for p in wiki.split("\n \n") if len(p.split()) > 20]
    return docs


def _upto(docs: list[str], limit: int) -> list[str]:
    """The first documents holding `limit` UTF-8 bytes."""
    out, size = [], 0
    for d in docs:
        if size >= limit:
            break
        out.append(d)
        size += len(d.encode("utf-8"))
    return out


def measure(docs: list[str], seed: int = 0) -> dict:
    order = np.random.default_rng(seed).permutation(len(docs))
    cut = len(docs) * 9 // 10
    train = _upto([docs[i] for i in order[:cut]], TRAIN_BYTES)
    held = _upto([docs[i] for i in order[cut:]], HELD_BYTES)
    counts = count_words(train, compile_pattern(), special_splitter(DEFAULT_SPECIALS))
    held_bytes = sum(len(t.encode("utf-8")) for t in held)
    scripts = [dominant_script(t) for t in held]
    rows = []
    for vocab in VOCABS:
        t0 = time.perf_counter()
        res = train_bpe(counts, vocab - 256 - len(DEFAULT_SPECIALS), 2, 256)
        tok = Tokenizer(res.merges, tuple(DEFAULT_SPECIALS))
        tokens = sum(len(ids) for ids in tok.encode_batch(held))
        rows.append(
            {
                "vocab_size": vocab,
                "merges": len(res.merges),
                "stop_reason": res.stop_reason,
                "bytes_per_token_heldout": round(held_bytes / tokens, 3),
                "seconds": round(time.perf_counter() - t0, 2),
            }
        )
        print(rows[-1], flush=True)
    return {
        "docs": len(docs),
        "train_mb": round(sum(len(t.encode("utf-8")) for t in train) / 1e6, 2),
        "heldout_mb": round(held_bytes / 1e6, 2),
        "heldout_dominant_script_share": round(
            float(np.mean(np.array(scripts) == np.bincount(scripts).argmax())), 3
        ),
        "by_vocab": rows,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", choices=["chinese", "english"])
    args = ap.parse_args()
    out = {"ranges_used": {"latin": LATIN_RANGE, "unspaced": UNSPACED_RANGE}}
    for name, load in (("chinese", chinese), ("english", english)):
        if args.only in (None, name):
            out[name] = measure(load())
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
