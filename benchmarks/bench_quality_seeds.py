"""Quality on real text vs junk, over several junk seeds: bench_quality_real.py's sets, runs and
AUCs (download -> clean -> quality, default quality config + `--quality` overrides), one language
at a time, mean and per seed. The English set is `build_set(--size)` (per source), the Chinese
and Russian ones `with_junk(chinese(--size) | russian(--size), seed + 1)` (seed 0 is the full
benchmark's own junk seed). Per seed: the share of real documents kept and, per target junk
kind, (ROC-AUC of `quality` against the real documents, share of the kind kept).

    .venv/bin/python benchmarks/bench_quality_seeds.py --lang en --seeds 0,1,2,3
    .venv/bin/python benchmarks/bench_quality_seeds.py --lang zh --size 300 --seeds 0,1,2 \\
        --quality '{"coherence_chain_docs": 0}'

Quick sets: en --size 150, zh/ru --size 75 (the defaults); full sets: en 600, zh/ru 300.
Writes --out (default outputs/benchmarks/quality_seeds_<lang>.json).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import bench_quality_real as bqr  # noqa: E402


def rows_for(lang: str, size: int, seed: int) -> list[dict]:
    if lang == "en":
        return bqr.build_set(size, seed=seed)
    docs = bqr.chinese(size) if lang == "zh" else bqr.russian(size)
    rows = bqr.with_junk(docs, seed=seed + 1)
    return [{**r, "kind": f"real:{lang}" if r["label"] else r["kind"]} for r in rows]


def one_seed(lang: str, size: int, seed: int, quality: dict) -> dict:
    rows = rows_for(lang, size, seed)
    with tempfile.TemporaryDirectory(prefix="bench-quality-seeds-") as tmp:
        scored, _ = bqr.run(rows, Path(tmp), quality)
    tab = bqr.table(rows, scored)
    auc = bqr.aucs(rows, scored, "quality") or {}
    real = [v for k, v in tab.items() if k.startswith("real:")]
    out: dict = {"real_kept": sum(v["kept"] for v in real) / sum(v["reached"] for v in real)}
    for k, v in tab.items():
        kind = k[5:]
        if k.startswith("junk:") and kind in bqr.JUNK and auc.get(kind) is not None:
            out[kind] = {"auc": auc[kind], "kept": v["kept_share"]}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lang", choices=("en", "zh", "ru"), default="en")
    ap.add_argument("--seeds", default="0,1,2,3")
    ap.add_argument("--size", type=int, default=None, help="en: per source (150); zh/ru: 75")
    ap.add_argument("--quality", default="{}", help="JSON overrides of the quality config")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    size = args.size or (150 if args.lang == "en" else 75)
    quality = json.loads(args.quality)
    seeds = [int(s) for s in args.seeds.split(",")]
    per_seed = {s: one_seed(args.lang, size, s, quality) for s in seeds}
    mean: dict = {"real_kept": round(statistics.mean(r["real_kept"] for r in per_seed.values()), 4)}
    kinds = sorted({k for r in per_seed.values() for k in r if k != "real_kept"})
    for k in kinds:
        got = [r[k] for r in per_seed.values() if k in r]
        kept = [g["kept"] for g in got if g["kept"] is not None]
        mean[k] = {
            "auc": round(statistics.mean(g["auc"] for g in got), 4),
            "kept": round(statistics.mean(kept), 4) if kept else None,
        }
    result = {"lang": args.lang, "size": size, "quality": quality, "mean": mean}
    result["per_seed"] = per_seed
    out = args.out or ROOT / "outputs" / "benchmarks" / f"quality_seeds_{args.lang}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps({"lang": args.lang, "size": size, "mean": mean}))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
