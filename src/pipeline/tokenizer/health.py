"""Bytes per token by script, and whether a vocabulary compresses each script as a healthy
byte-level BPE does.

A document counts for its dominant script (the one most of its letters belong to, classes of
pipeline.clean.charclass). Healthy ranges (UTF-8 bytes per token, EOS excluded):
- Latin/English 3.5–5: the design document's figure for a byte-level BPE; lower means a
  vocabulary too small for the corpus (long sequences), higher one filled with noise or a corpus
  with fewer distinct pieces than the vocabulary.
- unspaced scripts (Chinese/Japanese, Thai...) 3.5–6: measured by benchmarks/
  bench_bytes_per_token.py (docs/tokenizer.md). Our BPE trained on 1 MB of Chinese (CMRC 2018,
  reviews) gives, held out, 1.86 / 2.52 / 3.13 / 3.64 / 4.07 bytes/token at vocab 512 / 1024 /
  2048 / 4096 / 8192; on English at the same sizes 2.04 / 2.65 / 3.11 / 3.50 / 3.82. Chinese
  reaches the Latin floor at the same vocabulary as English (4096), so the floor is the same
  3.5 (below: characters, 3 bytes each, are split into bytes); the ceiling is two characters
  per token (6 bytes): more means memorised phrases.
Pure: counts in, numbers and messages out.
"""

from __future__ import annotations

import numpy as np

from pipeline.clean.charclass import LATIN, NUM_CLASSES, SCRIPTS, UNSPACED, char_classes

LATIN_RANGE = (3.5, 5.0)  # design doc 002: healthy English byte-level BPE
UNSPACED_RANGE = (3.5, 6.0)  # measured: bench_bytes_per_token.py, docs/tokenizer.md
MIN_SCRIPT_BYTES = 10_000  # fewer bytes of a script: too little text to judge its compression
NONE = len(SCRIPTS)  # "script" index of a document without letters


def dominant_script(text: str) -> int:
    """Index into charclass.SCRIPTS of the script most of `text`'s letters are in; NONE
    without letters. Letters only: digits, punctuation and spaces vote for no script."""
    if not text:
        return NONE
    _, cls = char_classes(text)
    counts = np.bincount(cls, minlength=NUM_CLASSES)[LATIN:]
    return int(np.argmax(counts)) if counts.any() else NONE


def healthy_range(script: str) -> tuple[float, float] | None:
    """The healthy bytes/token of `script` (a SCRIPTS name), None where none is known."""
    if script == "latin":
        return LATIN_RANGE
    if script in {SCRIPTS[c - LATIN] for c in UNSPACED}:
        return UNSPACED_RANGE
    return None


def by_script(
    scripts: np.ndarray, nbytes: np.ndarray, ntokens: np.ndarray
) -> dict[str, np.ndarray]:
    """Per-script sums int64 [len(SCRIPTS) + 1] (last: no letters) of documents, UTF-8 bytes
    and tokens, from per-document script indices, bytes and tokens (EOS excluded)."""
    size = len(SCRIPTS) + 1
    return {
        "docs": np.bincount(scripts, minlength=size).astype(np.int64),
        "bytes": np.bincount(scripts, weights=nbytes, minlength=size).astype(np.int64),
        "tokens": np.bincount(scripts, weights=ntokens, minlength=size).astype(np.int64),
    }


def script_table(sums: dict[str, np.ndarray]) -> dict[str, dict]:
    """{script: {docs, bytes, tokens, bytes_per_token, healthy}} for scripts with documents."""
    names = [*SCRIPTS, "none"]
    out = {}
    for i, name in enumerate(names):
        docs, nbytes, ntok = (int(sums[k][i]) for k in ("docs", "bytes", "tokens"))
        if not docs:
            continue
        rng = healthy_range(name)
        out[name] = {
            "docs": docs,
            "bytes": nbytes,
            "tokens": ntok,
            "bytes_per_token": round(nbytes / ntok, 3) if ntok else None,
            "healthy": list(rng) if rng else None,
        }
    return out


def warnings(table: dict[str, dict], vocab_size: int, vocab_key: str, stopped: bool) -> list[str]:
    """One line per script with enough text whose bytes/token is outside its healthy range."""
    out = []
    for name, row in table.items():
        rng, bpt = row["healthy"], row["bytes_per_token"]
        if rng is None or bpt is None or row["bytes"] < MIN_SCRIPT_BYTES:
            continue
        lo, hi = rng
        kind = "English/Latin" if name == "latin" else f"{name} (unspaced)"
        if bpt < lo:
            why = f"too small a vocabulary for this corpus: raise {vocab_key} (now {vocab_size:,})"
        elif bpt > hi:
            why = (
                "the corpus has fewer distinct pieces than the vocabulary (training stopped "
                f"early): more text or a smaller {vocab_key} (now {vocab_size:,})"
                if stopped
                else f"a vocabulary filled with noise (long junk pieces): check clean, or lower "
                f"{vocab_key} (now {vocab_size:,})"
            )
        else:
            continue
        out.append(
            f"{kind} text: {bpt:.2f} bytes/token, outside the healthy {lo:g}–{hi:g} of a "
            f"byte-level BPE ({row['docs']:,} documents): {why}"
        )
    return out
