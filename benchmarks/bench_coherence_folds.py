"""The quick sets of bench_quality_real (English 6 sources + junk, Chinese alone, Russian
alone) through download -> clean -> quality, with any quality overrides: per-kind AUC of
`quality`, real kept, median perplexity per kind and the fold routing report. Used to compare
`coherence_folds: doc` and `sentence` side by side (docs/quality.md, "Per-sentence fold
routing") and feature sets 2 and 4 ("Entity and number consistency"); `--reference-real` swaps
the self reference for a file of the set's real documents; `--seeds 0,1,2,3` draws the junk
with several seeds (same real documents) and adds the mean per kind. Writes
outputs/benchmarks/coherence_folds.json.

    python benchmarks/bench_coherence_folds.py --quality '{"coherence_folds": "sentence"}'
    python benchmarks/bench_coherence_folds.py --seeds 0,1,2,3 \
        --quality '{"coherence_folds": "sentence", "coherence_features": 4}'
    python benchmarks/bench_coherence_folds.py --langs en \
        --quality '{"reference_max_chars": 1000000}'
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "benchmarks"))

import bench_quality_real as bqr  # noqa: E402


def rows_of(lang: str, seed: int = 0) -> list[dict]:
    """The quick set of `lang`; seed 0 is bench_quality_real's, others draw other junk."""
    if lang == "en":
        return bqr.build_set(150, seed=seed)
    docs = bqr.chinese(75) if lang == "zh" else bqr.russian(75)
    return [
        {**r, "kind": f"real:{lang}" if r["label"] else r["kind"]}
        for r in bqr.with_junk(docs, seed=1 + seed)
    ]


def one(lang: str, seed: int, overrides: dict, reference_real: bool, tmp: Path) -> dict:
    rows = rows_of(lang, seed)
    quality = dict(overrides)
    if reference_real:
        ref = tmp / f"ref-{lang}.jsonl"
        real = [json.dumps({"text": r["text"]}) + "\n" for r in rows if r["label"]]
        ref.write_text("".join(real))
        quality["reference"] = str(ref)
    scored, stats = bqr.run(rows, tmp / f"{lang}-{seed}", quality)
    tab = bqr.table(rows, scored)
    return {
        **bqr.summary(tab),
        "auc_quality": bqr.aucs(rows, scored, "quality"),
        "kept": {k: f"{v['kept']}/{v['reached']}" for k, v in tab.items()},
        "median_perplexity": {k: v["median_perplexity"] for k, v in tab.items()},
        "fold_routing": stats.get("lm", {}).get("fold_routing"),
        "real_dropped": [
            f"doc{i}: {rows[i]['text'][:40]}"
            for i in range(len(rows))
            if rows[i]["label"] and not scored.get(f"doc{i}", {"kept": True})["kept"]
        ],
    }


def mean_of(runs: list[dict]) -> dict:
    """Mean real kept share and mean AUC per kind over the seeds' runs."""
    kinds = [k for k, v in runs[0]["auc_quality"].items() if v is not None]
    return {
        "real_kept_share": round(sum(r["real_kept_share"] for r in runs) / len(runs), 4),
        "auc_quality": {
            k: round(sum(r["auc_quality"][k] for r in runs) / len(runs), 4) for k in kinds
        },
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quality", default="{}", help="JSON overrides of the quality config")
    ap.add_argument("--langs", default="en,zh,ru")
    ap.add_argument("--reference-real", action="store_true", help="reference: the real docs")
    ap.add_argument(
        "--seeds", default="0", help="junk seeds (comma-separated): AUCs per seed and their mean"
    )
    args = ap.parse_args()
    out: dict = {"quality": json.loads(args.quality)}
    with tempfile.TemporaryDirectory(prefix="bench-coherence-folds-") as tmp:
        tmp = Path(tmp)
        for lang in args.langs.split(","):
            per_seed = {}
            for seed in [int(x) for x in args.seeds.split(",")]:
                per_seed[seed] = one(lang, seed, out["quality"], args.reference_real, tmp)
                brief = {k: per_seed[seed][k] for k in ("real_kept_share", "auc_quality")}
                print(lang, seed, json.dumps(brief, ensure_ascii=False), flush=True)
            out[lang] = per_seed[min(per_seed)] if len(per_seed) == 1 else per_seed
            if len(per_seed) > 1:
                mean = mean_of(list(per_seed.values()))
                out[f"{lang}_mean"] = mean
                print(lang, "mean", json.dumps(mean, ensure_ascii=False), flush=True)
    path = ROOT / "outputs" / "benchmarks" / "coherence_folds.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out, indent=1, ensure_ascii=False) + "\n")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
