"""Clean benchmark: our `clean` core vs datatrove's Gopher/C4/FineWeb filters, one core each,
on the same real documents from /work/shared/corpora (C4 sample, Dolma CC web, WikiText-2 raw).
Writes outputs/benchmarks/clean.json: docs/s and MB/s for both, the ratio, and per shared rule
the agreement rate on which documents it drops.

    .venv/bin/python benchmarks/bench_clean.py --setup   # once: builds .bench-venv-clean/
    .venv/bin/python benchmarks/bench_clean.py [--repeats 3]

datatrove (+ spaCy, its English word tokenizer) must not enter the project's dependencies, so
`--setup` installs `datatrove[processing]` and `spacy` into .bench-venv-clean/ (git-ignored) and
benchmarks/clean_datatrove_worker.py runs there as a subprocess. Without that venv only our
numbers are written. Agreement is measured with our normalisation switched off, so both sides
see byte-identical text; our speed is measured with every default on (normalise + PII + rules).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from pipeline.clean.rules import RULE_NAMES  # noqa: E402
from pipeline.stages.clean import CleanConfig, clean_texts  # noqa: E402

CORPORA = Path("/work/shared/corpora")
VENV = ROOT / ".bench-venv-clean"
WORKER = ROOT / "benchmarks" / "clean_datatrove_worker.py"
OUT = ROOT / "outputs" / "benchmarks" / "clean.json"
RAW = CleanConfig(
    remove_control=False,
    strip_html=False,
    nfkc=False,
    remove_boilerplate_lines=False,
    fold_whitespace=False,
    redact_pii=[],
)


def load_docs() -> dict[str, list[str]]:
    """Non-empty documents per corpus (datatrove divides by zero on empty text)."""
    c4 = []
    for path in sorted((CORPORA / "c4_sample").glob("*.json.gz")):
        c4 += [json.loads(line)["text"] for line in gzip.open(path, "rt", encoding="utf-8")]
    cc = []
    for path in sorted((CORPORA / "dolma_cc_web").glob("*.json*")):
        opener = gzip.open if path.suffix == ".gz" else open
        cc += [json.loads(line)["text"] for line in opener(path, "rt", encoding="utf-8")]
    raw = (CORPORA / "wikitext-2-raw" / "wiki.test.raw").read_text(encoding="utf-8")
    raw = raw.replace("\r\n", "\n")
    wiki = [a for a in re.split(r"\n(?= = [^=].* = \n)", raw) if a.strip()]
    docs = {"c4_sample": c4, "dolma_cc_web": cc, "wikitext2_test": wiki}
    return {k: [t for t in v if t and t.strip()] for k, v in docs.items()}


def time_ours(texts: list[str], cfg: CleanConfig, repeats: int) -> float:
    runs = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        clean_texts(texts, cfg)
        runs.append(time.perf_counter() - t0)
    return statistics.median(runs)


def setup() -> None:
    subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
    subprocess.run(
        [str(VENV / "bin" / "pip"), "install", "-q", "datatrove[processing]", "spacy"], check=True
    )


def run_datatrove(texts: list[str], repeats: int) -> dict | str:
    python = VENV / "bin" / "python"
    if not python.exists():
        return "not installed: run `python benchmarks/bench_clean.py --setup` first"
    with tempfile.TemporaryDirectory() as tmp:
        docs, out = Path(tmp) / "docs.jsonl", Path(tmp) / "out.json"
        docs.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts), encoding="utf-8")
        env = dict(os.environ, OMP_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false")
        proc = subprocess.run(
            [str(python), str(WORKER), str(docs), str(out), str(repeats)],
            env=env,
            capture_output=True,
            text=True,
        )
        if proc.returncode != 0:
            return f"worker failed: {proc.stderr.strip().splitlines()[-1:]}"
        return json.loads(out.read_text())


def agreement(ours: np.ndarray, theirs: dict[str, list[bool]]) -> dict[str, dict]:
    out = {}
    # the worker names each datatrove check by our rule's unversioned base name + _v1; compare
    # with our current version of that rule (issue 23 made several _v2)
    current = {r.rsplit("_v", 1)[0]: i for i, r in enumerate(RULE_NAMES)}
    for name, dt in sorted(theirs.items()):
        mine = ours[:, current[name.rsplit("_v", 1)[0]]]
        dt = np.asarray(dt, bool)
        out[name] = {
            "agreement": round(float((mine == dt).mean()), 4),
            "ours_drop": int(mine.sum()),
            "datatrove_drop": int(dt.sum()),
            "both_drop": int((mine & dt).sum()),
        }
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--setup", action="store_true", help="build .bench-venv-clean with datatrove")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    if args.setup:
        setup()
    corpora = load_docs()
    texts = [t for v in corpora.values() for t in v]
    mb = sum(len(t.encode("utf-8")) for t in texts) / 1e6
    clean_texts(texts[:20], CleanConfig())  # warm up
    ours_s = time_ours(texts, CleanConfig(), args.repeats)
    raw_s = time_ours(texts, RAW, args.repeats)
    result: dict = {
        "docs": len(texts),
        "mb": round(mb, 3),
        "docs_per_corpus": {k: len(v) for k, v in corpora.items()},
        "repeats": args.repeats,
        "ours": {
            "seconds": round(ours_s, 3),
            "docs_per_s": round(len(texts) / ours_s, 1),
            "mb_per_s": round(mb / ours_s, 3),
            "rules_only_docs_per_s": round(len(texts) / raw_s, 1),
        },
    }
    dt = run_datatrove(texts, args.repeats)
    if isinstance(dt, str):
        result["datatrove"] = dt
    else:
        chain_s, all_s = dt["chain_seconds"], dt["all_filters_seconds"]
        result["datatrove"] = {
            "chain_docs_per_s": round(len(texts) / chain_s, 1),
            "all_filters_docs_per_s": round(len(texts) / all_s, 1),
            "chain_mb_per_s": round(mb / chain_s, 3),
        }
        result["ratio_vs_chain"] = round(chain_s / ours_s, 1)
        result["ratio_vs_all_filters"] = round(all_s / ours_s, 1)
        fails = clean_texts(texts, RAW).fails
        result["agreement"] = agreement(fails, dt["decisions"])
        rates = [v["agreement"] for v in result["agreement"].values()]
        result["agreement_mean"] = round(float(np.mean(rates)), 4)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k != "agreement"}, indent=2))
    for name, a in result.get("agreement", {}).items():
        print(
            f"  {name:34s} agree {a['agreement']:.3f}  ours {a['ours_drop']:4d}  "
            f"datatrove {a['datatrove_drop']:4d}  both {a['both_drop']:4d}"
        )


if __name__ == "__main__":
    main()
