"""Proof that a refactor changed no output byte: run recipes with two source trees (before,
after) on 1 and 2 local workers and on Ray, and compare every data file of the run folders by
sha256. manifest.json and pipeline_report.json are compared without their clock fields
(seconds, rates, finish times); keys and files only the new code writes are listed, not failed
(a new file's manifest entry is left out of the comparison; a file the new code no longer
writes, or writes with other bytes, fails).

    python benchmarks/same_bytes.py --before /work/old/src --after src
    python benchmarks/same_bytes.py --after src --before-json outputs/benchmarks/before.json
    python benchmarks/same_bytes.py --before /work/old/src --after src \
        --after-set quality.splice_gate=false    (a new default switched off: the old bytes?)

Writes outputs/benchmarks/same_bytes.json: per run, the files compared, the differing ones, and
the manifest/report keys added or removed. Exit status 1 if any data file differs.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# (name, recipe, extra CLI arguments)
RUNS = [
    ("toy-w1", "recipes/data_toy.yaml", ["--workers", "1"]),
    ("toy-w2", "recipes/data_toy.yaml", ["--workers", "2"]),
    ("toy-ray", "recipes/data_toy.yaml", ["--executor", "ray", "--workers", "2"]),
    ("demo-w1", "recipes/data_demo.yaml", ["--workers", "1", "--set", "download.max_docs=400"]),
    ("demo-w2", "recipes/data_demo.yaml", ["--workers", "2", "--set", "download.max_docs=400"]),
    (
        "demo-ray",
        "recipes/data_demo.yaml",
        ["--executor", "ray", "--workers", "2", "--set", "download.max_docs=400"],
    ),
]
JSON_FILES = ("manifest.json", "pipeline_report.json")
SKIP = {".lock", ".input_hashes.json", ".output_hashes.json", "report.html"}  # caches; timings
CLOCK = ("seconds", "finished_at", "started_at", "wall_s")


def timeless(obj):
    """`obj` without what depends on the clock."""
    if isinstance(obj, dict):
        return {
            k: timeless(v)
            for k, v in obj.items()
            if k not in CLOCK and not k.endswith(("_per_s", "_seconds"))
        }
    if isinstance(obj, list):
        return [timeless(v) for v in obj]
    return obj


def key_paths(obj, prefix: str = "") -> set[str]:
    """Every dict key path of a JSON value (list items share their parent's path)."""
    out = set()
    if isinstance(obj, dict):
        for k, v in obj.items():
            out.add(f"{prefix}{k}")
            out |= key_paths(v, f"{prefix}{k}.")
    elif isinstance(obj, list):
        for v in obj:
            out |= key_paths(v, prefix)
    return out


def strip_keys(obj, keys: set[str], prefix: str = ""):
    if isinstance(obj, dict):
        return {
            k: strip_keys(v, keys, f"{prefix}{k}.")
            for k, v in obj.items()
            if f"{prefix}{k}" not in keys
        }
    if isinstance(obj, list):
        return [strip_keys(v, keys, prefix) for v in obj]
    return obj


def without_files(obj, paths: set[str]):
    """`obj` without the manifest's output entries ({"path": ...}) of `paths`."""
    if isinstance(obj, dict):
        return {k: without_files(v, paths) for k, v in obj.items()}
    if isinstance(obj, list):
        return [
            without_files(v, paths)
            for v in obj
            if not (isinstance(v, dict) and v.get("path") in paths)
        ]
    return obj


def run_folder_digest(run_dir: Path) -> dict:
    """{relative path: sha256} of every data file, and the timeless manifest and report."""
    files, docs = {}, {}
    for p in sorted(run_dir.rglob("*")):
        rel = p.relative_to(run_dir).as_posix()
        if not p.is_file() or p.name in SKIP:
            continue
        if rel in JSON_FILES:
            docs[rel] = timeless(json.loads(p.read_text(encoding="utf-8")))
        else:
            files[rel] = hashlib.sha256(p.read_bytes()).hexdigest()
    return {"files": files, "json": docs}


def run_all(src: Path, work: Path, only: list[str] | None, sets: list[str] | None = None) -> dict:
    out = {}
    work.mkdir(parents=True, exist_ok=True)
    for name, recipe, extra in RUNS:
        if only and name not in only:
            continue
        run_dir = work / name
        env = {**os.environ, "PYTHONPATH": str(src)}
        cmd = [sys.executable, "-m", "pipeline", "data", "-q", "--config", str(ROOT / recipe)]
        cmd += ["--out-dir", str(run_dir), *extra]
        for kv in sets or []:
            cmd += ["--set", kv]
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=work)
        if proc.returncode and "timed out during startup" in proc.stderr:  # Ray on a busy box
            proc = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=work)
        took = round(time.perf_counter() - t0, 1)
        print(f"{src}: {name} rc={proc.returncode} {took} s", file=sys.stderr)
        if proc.returncode:
            out[name] = {"error": proc.stderr[-2000:]}
            continue
        out[name] = {**run_folder_digest(run_dir), "seconds": took}
    return out


def compare(before: dict, after: dict) -> dict:
    result = {}
    for name in after:
        a, b = before.get(name), after[name]
        if a is None or "error" in a or "error" in b:
            result[name] = {"error": (a or {}).get("error") or b.get("error") or "no before run"}
            continue
        fa, fb = a["files"], b["files"]
        new_files = sorted(fb.keys() - fa.keys())  # only the new code writes them: listed
        differ = sorted(f for f in fa.keys() if fa.get(f) != fb.get(f))
        json_diff, added, removed = [], {}, {}
        for rel in JSON_FILES:
            ka, kb = key_paths(a["json"].get(rel)), key_paths(b["json"].get(rel))
            added[rel], removed[rel] = sorted(kb - ka), sorted(ka - kb)
            common = ka & kb
            ja, jb = a["json"].get(rel), without_files(b["json"].get(rel), set(new_files))
            if strip_keys(ja, ka - common) != strip_keys(jb, kb - common):
                json_diff.append(rel)
        result[name] = {
            "data_files": len(b["files"]),
            "differing_files": differ,
            "added_files": new_files,
            "json_differing_values": json_diff,
            "json_keys_added": added,
            "json_keys_removed": removed,
            "same": not differ and not json_diff,
        }
    return result


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", type=Path, help="src folder of the old code")
    ap.add_argument("--before-json", type=Path, help="digests of an earlier --before run")
    ap.add_argument("--after", type=Path, default=ROOT / "src")
    ap.add_argument("--save-before", type=Path, help="write the before digests here")
    ap.add_argument("--before-only", action="store_true", help="run the old code only")
    ap.add_argument("--only", nargs="*", help="run names (default: all)")
    ap.add_argument(
        "--after-set", action="append", default=[], help="recipe override for the after runs"
    )
    ap.add_argument("--out", type=Path, default=ROOT / "outputs/benchmarks/same_bytes.json")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        if args.before_json:
            before = json.loads(args.before_json.read_text())
        else:
            before = run_all(args.before.resolve(), Path(tmp) / "before", args.only)
            if args.save_before:
                args.save_before.parent.mkdir(parents=True, exist_ok=True)
                args.save_before.write_text(json.dumps(before, indent=1))
        if args.before_only:
            return 0
        after = run_all(args.after.resolve(), Path(tmp) / "after", args.only, args.after_set)
    result = compare(before, after)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps({k: v.get("same", v.get("error")) for k, v in result.items()}, indent=1))
    return 0 if all(v.get("same") for v in result.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
