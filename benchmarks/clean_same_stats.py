"""Proof that a change to clean's core changed no number: every document of every real corpus
(bench_clean_real.load_sources, all documents, not a sample), the toy corpus and `--bench-docs`
documents of bench_scale's corpus go through `clean_texts` under two source trees, with the demo
recipe's clean block and with the defaults; per document the statistics (NaN = NaN), the failed
rules, the output text, and per batch the PII and normalisation counts and scripts must be equal.

    .venv/bin/python benchmarks/clean_same_stats.py --before /work/base/src [--only reuters toy]

Each side runs in its own subprocess (PYTHONPATH = its tree). Writes
outputs/benchmarks/clean_same_stats.json; exit status 1 if anything differs. ~10 CPU-minutes.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "outputs" / "benchmarks" / "clean_same_stats.json"

CHILD = r"""
import hashlib, json, sys
from pathlib import Path
import numpy as np
root, out, bench_docs, only = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3]), sys.argv[4:]
sys.path.insert(0, str(root / "benchmarks"))
from bench_clean_real import load_sources
from bench_scale import make_corpus
from pipeline.recipe import load_recipe
from pipeline.sources import toy
from pipeline.stages.clean import CleanConfig, clean_texts
srcs = load_sources()
srcs["toy"] = [d.text for d in toy.generate(2000, seed=1234)]
corpus = out / "bench.jsonl"
make_corpus(corpus, 8)
srcs["bench"] = [json.loads(line)["text"] for line in open(corpus)][:bench_docs]
cfgs = {"demo": load_recipe(root / "recipes" / "data_demo.yaml").stages["clean"],
        "default": CleanConfig()}
for name, docs in srcs.items():
    if only and name not in only:
        continue
    for cn, cfg in cfgs.items():
        b = clean_texts(list(docs), cfg)
        h = [hashlib.sha1(t.encode("utf-8", "surrogatepass")).hexdigest() for t in b.texts]
        np.save(out / f"{name}.{cn}.stats.npy", b.stats, allow_pickle=False)
        np.save(out / f"{name}.{cn}.fails.npy", b.fails, allow_pickle=False)
        meta = {"h": h, "pii": b.pii_counts, "norm": b.normalize_counts.tolist(),
                "scripts": dict(b.scripts)}
        (out / f"{name}.{cn}.json").write_text(json.dumps(meta))
"""


def dump(src: str, out: Path, bench_docs: int, only: list[str]) -> None:
    env = dict(os.environ, PYTHONPATH=src, OMP_NUM_THREADS="1")
    args = [sys.executable, "-c", CHILD, str(ROOT), str(out), str(bench_docs), *only]
    proc = subprocess.run(args, env=env, capture_output=True, text=True)
    if proc.returncode:
        sys.exit(f"error: the run with PYTHONPATH={src} failed: {proc.stderr.strip()[-2000:]}")


def compare(a: Path, b: Path) -> dict[str, dict]:
    out = {}
    for f in sorted(a.glob("*.stats.npy")):
        stem = f.name[: -len(".stats.npy")]
        sa = np.load(f, allow_pickle=False)
        sb = np.load(b / f.name, allow_pickle=False)
        same = (sa == sb) | (np.isnan(sa) & np.isnan(sb))
        fa = np.load(a / f"{stem}.fails.npy", allow_pickle=False)
        fb = np.load(b / f"{stem}.fails.npy", allow_pickle=False)
        ja = json.loads((a / f"{stem}.json").read_text())
        jb = json.loads((b / f"{stem}.json").read_text())
        texts = sum(x != y for x, y in zip(ja["h"], jb["h"], strict=True))
        out[stem] = {
            "docs": int(sa.shape[0]),
            "docs_stats_differ": int((~same).any(axis=1).sum()),
            "docs_reasons_differ": int((fa != fb).any(axis=1).sum()),
            "docs_text_differs": texts,
            "counts_equal": all(ja[k] == jb[k] for k in ("pii", "norm", "scripts")),
        }
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", required=True, help="src/ of the tree to compare with")
    ap.add_argument("--bench-docs", type=int, default=4000)
    ap.add_argument("--only", nargs="*", default=[], help="sources (default: all)")
    ap.add_argument("--out", default=str(OUT))
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        a, b = Path(tmp) / "before", Path(tmp) / "after"
        a.mkdir()
        b.mkdir()
        dump(str(Path(args.before).resolve()), a, args.bench_docs, args.only)
        dump(str(ROOT / "src"), b, args.bench_docs, args.only)
        result = compare(a, b)
    ok = all(
        r["docs_stats_differ"] == r["docs_reasons_differ"] == r["docs_text_differs"] == 0
        and r["counts_equal"]
        for r in result.values()
    )
    for name, r in result.items():
        print(f"{name:32s} {r}", file=sys.stderr)
    total = sum(r["docs"] for r in result.values())
    print(f"{'ALL EQUAL' if ok else 'DIFFER'}: {total} document runs", file=sys.stderr)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({"equal": ok, "runs": result}, indent=1) + "\n")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
