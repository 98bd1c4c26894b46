"""Per-document cost of the quality stage's scoring pass, coherence feature sets 1, 2, 3, 4, and
sets 2 and 4 with `coherence_folds: sentence` (per-sentence fold routing, quality/folds.py).

The stage's fixed costs (the self reference's draw, the LM fit, the classifiers) are bounded by
reference_max_chars and coherence_train_docs, so on a large corpus the per-document cost is the
scoring pass: tokenise, fold-model lookups, features, classifier, plus the heuristic
statistics. This times exactly that on bench_quality_real's English set (real documents and
their junk; median of interleaved repeats, CPU seconds of this process, one core), and the
features alone. Writes outputs/benchmarks/coherence_speed.json.

    python benchmarks/bench_coherence_speed.py [--repeats 5]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "benchmarks"))

import bench_quality_real as bqr  # noqa: E402
from pipeline.quality.features import stats_matrix  # noqa: E402
from pipeline.quality.lmscore import LMParams, fit_classifiers, fit_lm, text_keys  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--per-source", type=int, default=150)
    args = ap.parse_args()
    rows = bqr.build_set(args.per_source, seed=0)
    texts = [r["text"] for r in rows]
    keys = text_keys(texts)
    scorers = {}
    for k, folds in (
        (1, "doc"),
        (2, "doc"),
        (3, "doc"),
        (4, "doc"),
        (2, "sentence"),
        (4, "sentence"),
    ):
        sc, ref = fit_lm(texts, keys, LMParams(seed=0, feature_set=k, folds=folds))
        fit_classifiers(sc, ref, None)
        scorers[k if folds == "doc" else f"{k}_{folds}"] = sc
    times: dict[str, list[float]] = {f"features_{k}": [] for k in scorers}
    times["stats"] = []
    for _ in range(args.repeats):  # interleaved: load drifts hit both alike
        for k, sc in scorers.items():
            t0 = time.process_time()
            feats, script = sc.features(texts, keys)
            sc.coherence(feats, script)
            times[f"features_{k}"].append(time.process_time() - t0)
        t0 = time.process_time()
        stats_matrix(texts, 100_000)
        times["stats"].append(time.process_time() - t0)
    med = {k: statistics.median(v) for k, v in times.items()}
    n = len(texts)
    out = {
        "docs": n,
        "mb": round(sum(map(len, texts)) / 1e6, 2),
        "cpu_seconds_median": {k: round(v, 3) for k, v in med.items()},
        "docs_per_cpu_s": {
            **{f"lm_scoring_set_{k}": round(n / med[f"features_{k}"], 1) for k in scorers},
            **{
                f"scoring_pass_set_{k}": round(n / (med[f"features_{k}"] + med["stats"]), 1)
                for k in scorers
            },
        },
        "set_2_extra_cpu_share": round(
            float(np.float64(med["features_2"]) / med["features_1"] - 1), 3
        ),
        "set_3_extra_cpu_share_over_set_2": round(
            float(np.float64(med["features_3"]) / med["features_2"] - 1), 3
        ),
        "set_4_extra_cpu_share_over_set_2": round(
            float(np.float64(med["features_4"]) / med["features_2"] - 1), 3
        ),
        "set_4_sentence_extra_cpu_share_over_set_2_sentence": round(
            float(np.float64(med["features_4_sentence"]) / med["features_2_sentence"] - 1), 3
        ),
        "sentence_folds_extra_cpu_share_over_set_2": round(
            float(np.float64(med["features_2_sentence"]) / med["features_2"] - 1), 3
        ),
    }
    path = ROOT / "outputs" / "benchmarks" / "coherence_speed.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
