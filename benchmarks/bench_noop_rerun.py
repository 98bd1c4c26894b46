"""A no-op re-run of a finished run (every stage skipped) and its `--dry-run`: bytes read and
seconds, before (every output re-hashed) vs after (output hashes cached by path, size,
mtime_ns and inode).

    .venv/bin/python benchmarks/bench_noop_rerun.py --mb 100 [--before-rev REV] [--repeats 3]

The finished run: bench_scale.py's corpus (`make_corpus`, real-text-derived documents from
/work/shared/corpora) and recipe (every stage), run once with this tree. Then, interleaved,
`--repeats` times each (one fresh process per measurement, as `pipeline data` is):

- `before`: the code at `--before-rev` (default: `git merge-base HEAD main`, when that is not
  HEAD itself), extracted with `git archive`, re-running the same folder;
- `cold`: this tree with `<run>/.output_hashes.json` deleted first: what the old code pays on
  every re-run (each output read once), and this tree on its first re-run after an upgrade;
- `after`: this tree, cache in place.

Bytes are the process's `rchar` (every byte read by a read syscall, page cache included) and
`read_bytes` (what reached the storage layer) from /proc/self/io, taken around `run_recipe`
alone (imports excluded), plus the bytes passed to `io.sha256_file`. Outputs are page-cached
here (just written), so `seconds` is the CPU side of hashing; on a cold shared filesystem the
`before` read is bound by its bandwidth instead. Writes outputs/benchmarks/noop_rerun.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_scale import make_corpus  # noqa: E402

OUT = ROOT / "outputs" / "benchmarks" / "noop_rerun.json"
CACHE = ".output_hashes.json"

CHILD = r"""
import json, os, sys, threading, time
sys.path.insert(0, sys.argv[1])
try:
    from pipeline.run.runner import run_recipe
except ImportError:  # the layout before run/
    from pipeline.runner import run_recipe
from pipeline.recipe import load_recipe
import pipeline.io as pio

hashed, lock = [0, 0], threading.Lock()
real = pio.sha256_file
def counting(path, *a, **kw):  # called from sha256_files' thread pool
    with lock:
        hashed[0] += 1
        hashed[1] += os.path.getsize(path)
    return real(path, *a, **kw)
pio.sha256_file = counting

def io_counters():
    with open("/proc/self/io") as f:
        rows = dict(line.split(": ") for line in f.read().splitlines())
    return {k: int(rows[k]) for k in ("rchar", "read_bytes")}

recipe = load_recipe(sys.argv[2], [])
before = io_counters()
t0 = time.perf_counter()
items = run_recipe(recipe, dry_run=sys.argv[3] == "dry", progress=False)
seconds = time.perf_counter() - t0
after = io_counters()
print(json.dumps({
    "seconds": round(seconds, 4),
    "rchar": after["rchar"] - before["rchar"],
    "read_bytes": after["read_bytes"] - before["read_bytes"],
    "files_hashed": hashed[0],
    "bytes_hashed": hashed[1],
    "actions": sorted({i.action for i in items}),
}))
"""


def recipe_yaml(path: Path, corpus: Path, run_dir: Path, workers: int, docs_per_part: int) -> None:
    raw = {  # bench_scale.py's recipe
        "name": "noop",
        "seed": 1,
        "out_dir": str(run_dir),
        "workers": workers,
        "download": {"source": "jsonl", "path": str(corpus), "docs_per_part": docs_per_part},
        "clean": {"max_fineweb_dup_line_chars_frac": 0.1},
        "dedup": {},
        "quality": {},
        "tokenize": {"vocab_size": 8192, "max_train_bytes": 20_000_000},
        "pack": {"seq_len": 1024},
        "shard": {"shard_size": 1024},
    }
    path.write_text(yaml.safe_dump(raw, sort_keys=False))


def measure(src: Path, recipe: Path, mode: str) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(src), str(recipe), mode],
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def extract(rev: str, into: Path) -> Path:
    """`src/` of `rev`, extracted into `into` (git archive: no checkout, no worktree)."""
    blob = subprocess.run(
        ["git", "-C", str(ROOT), "archive", rev, "src"], check=True, capture_output=True
    ).stdout
    tar = into / "src.tar"
    tar.write_bytes(blob)
    with tarfile.open(tar) as t:
        t.extractall(into, filter="data")
    return into / "src"


def default_before() -> str | None:
    def git(*a: str) -> str:
        return subprocess.run(
            ["git", "-C", str(ROOT), *a], check=True, capture_output=True, text=True
        ).stdout.strip()

    try:
        base, head = git("merge-base", "HEAD", "main"), git("rev-parse", "HEAD")
    except subprocess.CalledProcessError:
        return None
    return None if base == head else base


def summary(rows: list[dict]) -> dict:
    keys = ("seconds", "rchar", "read_bytes", "files_hashed", "bytes_hashed")
    out = {f"median_{k}": statistics.median(r[k] for r in rows) for k in keys}
    out["actions"] = sorted({a for r in rows for a in r["actions"]})
    out["runs"] = rows
    return out


def output_bytes(run_dir: Path) -> tuple[int, int]:
    stages = json.loads((run_dir / "manifest.json").read_text())["stages"]
    outs = [o for e in stages.values() for o in e["outputs"]]
    return len(outs), sum(o["bytes"] for o in outs)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=float, default=100.0, help="corpus size in MB of text")
    ap.add_argument("--workers", type=int, default=2, help="workers of the run that is built")
    ap.add_argument("--docs-per-part", type=int, default=2000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--before-rev", default=None, help="git rev of `before` (default: see doc)")
    ap.add_argument("--work", default=None, help="work folder (default: a new temp dir)")
    ap.add_argument("--out", type=Path, default=OUT, help="JSON file to write")
    args = ap.parse_args()
    work = Path(args.work or tempfile.mkdtemp(prefix="bench-noop-"))
    work.mkdir(parents=True, exist_ok=True)
    corpus, run_dir, recipe = work / "corpus.jsonl", work / "run", work / "recipe.yaml"
    if not corpus.exists():
        info = make_corpus(corpus, args.mb)
        print(f"corpus: {info}", file=sys.stderr)
    recipe_yaml(recipe, corpus, run_dir, args.workers, args.docs_per_part)
    here = ROOT / "src"
    t0 = time.perf_counter()
    build = measure(here, recipe, "run")
    print(f"built {run_dir} in {time.perf_counter() - t0:.0f} s: {build}", file=sys.stderr)
    rev = args.before_rev or default_before()
    old = extract(rev, Path(tempfile.mkdtemp(prefix="src-", dir=work))) if rev else None
    rows: dict[str, list[dict]] = {}
    for _ in range(args.repeats):
        for mode in ("run", "dry"):
            if old is not None:
                rows.setdefault(f"before_{mode}", []).append(measure(old, recipe, mode))
            (run_dir / CACHE).unlink(missing_ok=True)
            rows.setdefault(f"cold_{mode}", []).append(measure(here, recipe, mode))
            if mode == "dry":  # a dry run writes no cache: the next `after` needs one
                measure(here, recipe, "run")
            rows.setdefault(f"after_{mode}", []).append(measure(here, recipe, mode))
    files, nbytes = output_bytes(run_dir)
    result = {
        "corpus_mb": args.mb,
        "cpus": os.cpu_count(),
        "load_avg_at_start": os.getloadavg()[0],
        "before_rev": rev,
        "output_files": files,
        "output_bytes": nbytes,
        "build_seconds": build["seconds"],
        "measurements": {k: summary(v) for k, v in rows.items()},
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    brief = {
        k: {m: v[m] for m in ("median_seconds", "median_rchar", "median_bytes_hashed", "actions")}
        for k, v in result["measurements"].items()
    }
    print(json.dumps({"output_files": files, "output_bytes": nbytes, **brief}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
