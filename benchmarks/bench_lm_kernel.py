"""The quality LM's scoring loop: NgramLM.log_probs (compiled, quality/kernels.py) against its
numpy definition (log_probs_numpy), on real text, one thread, the same process, interleaved
repeats, CPU-time medians; the outputs are checked bit for bit every repeat.

    .venv/bin/python benchmarks/bench_lm_kernel.py --mb 4

Corpus: bench_scale's (real text from /work/shared/corpora). The first half of the documents
trains a 4-fold order-4 model for each reference size (--ref-docs), the second half is scored.
Writes outputs/benchmarks/lm_kernel.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "outputs" / "benchmarks" / "lm_kernel.json"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", type=float, default=4.0, help="corpus size, MB of text")
    ap.add_argument("--ref-docs", default="100,1000,3000", help="reference sizes (documents)")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT / "src"))
    from bench_scale import make_corpus
    from pipeline.quality.ngram import tokenize, train_lm

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "corpus.jsonl"
        make_corpus(path, args.mb)
        texts = [json.loads(line)["text"] for line in path.open()]
    half = len(texts) // 2
    toks = tokenize(texts[half:], 100_000)
    rng = np.random.default_rng(0)
    fold = rng.integers(0, 4, len(toks.lengths))
    rows = []
    for n in [int(x) for x in args.ref_docs.split(",")]:
        ref = tokenize(texts[: min(n, half)], 100_000)
        lm = train_lm(ref, 4, rng.integers(0, 4, len(ref.lengths)), 4)
        lm.log_probs(toks, fold)  # compile or load the kernel, build both tables
        lm.log_probs_numpy(toks, fold)
        times: dict[str, list[float]] = {"numpy": [], "compiled": []}
        for _ in range(args.repeats):
            for name, fn in (("numpy", lm.log_probs_numpy), ("compiled", lm.log_probs)):
                t0 = time.process_time()
                got = fn(toks, fold)
                times[name].append(time.process_time() - t0)
                if name == "numpy":
                    want = got
            for g, w in zip(got, want, strict=True):
                assert np.array_equal(g.view(np.uint8), w.view(np.uint8)), "outputs differ"
        med = {k: statistics.median(v) for k, v in times.items()}
        rows.append(
            {
                "reference_docs": n,
                "ngrams": lm.num_ngrams,
                "tokens_scored": int(len(toks.ids)),
                "numpy_cpu_s": round(med["numpy"], 4),
                "compiled_cpu_s": round(med["compiled"], 4),
                "speedup": round(med["numpy"] / med["compiled"], 2),
                "ns_per_token_compiled": round(1e9 * med["compiled"] / len(toks.ids), 1),
            }
        )
        print(json.dumps(rows[-1]), file=sys.stderr)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"rows": rows, "same_bits": True}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
