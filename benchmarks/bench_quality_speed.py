"""Quality-stage speed (issue 27, item 3): MB of input text per CPU-second of the quality stage
alone, default config (score combined, reference self), one worker, with two source trees side
by side (before, after), interleaved repeats, CPU-time medians; plus the share of one GPT-2
pattern `regex` findall pass over the same texts (the machine's yardstick).

    .venv/bin/python benchmarks/bench_quality_speed.py --before /work/base/src --mb 20

Corpus: bench_scale's (real text from /work/shared/corpora, perturbed copies) through download,
clean and dedup once (with the after tree); then each repeat copies that run folder and runs
`--only quality --force` in a subprocess with each tree on PYTHONPATH, timing the child's CPU
(user + system, itself and its children; one BLAS thread). The quality outputs of both trees
are compared by sha256 (identical bytes expected). Each repeat also times the stage's steps
(their functions wrapped): the per-document passes (PER_DOCUMENT), which grow with the
corpus, and the fixed fits (FIXED), bounded by reference_max_chars and coherence_train_docs.
`--clean-defaults` cleans with clean's defaults instead of the corpus's looser FineWeb
duplicate-line threshold (the self reference's draw then reads clean's kept parts, not a
second clean). `--profile` adds one cProfile run of the after tree (top functions by
cumulative and own time). Writes outputs/benchmarks/quality_speed.json.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from cpu_steps import time_steps

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "outputs" / "benchmarks" / "quality_speed.json"
GPT2_PATTERN = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""


def _recipe(
    run_dir: Path, corpus: Path, reference_chars: int, docs_per_part: int, clean_defaults: bool
) -> dict:
    quality = {"reference_max_chars": reference_chars} if reference_chars else {}
    return {
        "name": "quality-speed",
        "seed": 1,
        "out_dir": str(run_dir),
        "workers": 1,
        "download": {"source": "jsonl", "path": str(corpus), "docs_per_part": docs_per_part},
        # the corpus's perturbed copies repeat lines: FineWeb's 1% would drop most of them
        "clean": {} if clean_defaults else {"max_fineweb_dup_line_chars_frac": 0.1},
        "dedup": {},
        "quality": quality,
    }


def _cpu() -> float:
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


# the stage's steps whose CPU the child reports (one worker: all inline, none nested in
# another): the per-document passes grow with the corpus, the fixed fits are bounded by
# reference_max_chars and coherence_train_docs
PER_DOCUMENT = {
    "stats pass": ("pipeline.stages.quality", "_scan_part"),
    "LM score pass": ("pipeline.stages.quality.lm", "score_part"),
    "coherence pass": ("pipeline.stages.quality.lm", "_coherence_part"),
    "write pass": ("pipeline.stages.quality.write", "write_part"),
}
FIXED = {
    "reference draw": ("pipeline.stages.quality.lm", "self_reference"),
    "LM fit": ("pipeline.stages.quality.lm", "fit_texts"),
    "coherence fit": ("pipeline.stages.quality.lm", "fit_coherence"),
}


def child(args: argparse.Namespace) -> dict:
    """Run (only quality, or up to dedup with --prepare) and report CPU seconds."""
    from pipeline.recipe import build_recipe
    from pipeline.report import load_report
    from pipeline.run.runner import run_recipe

    run_dir = Path(args.run_dir)
    recipe = build_recipe(
        _recipe(run_dir, Path(args.corpus), args.reference_chars, args.dpp, args.clean_defaults)
    )
    if args.prepare:
        run_recipe(recipe, until="dedup", progress=False)
        return {}
    prof = None
    if args.profile:
        import cProfile

        prof = cProfile.Profile()
        prof.enable()
    steps: dict[str, float] = {}
    if not prof:
        time_steps(steps, {**PER_DOCUMENT, **FIXED})
    c0, t0 = _cpu(), time.perf_counter()
    run_recipe(recipe, only="quality", force=True, progress=False)
    cpu, wall = _cpu() - c0, time.perf_counter() - t0
    out: dict = {"cpu_s": cpu, "wall_s": wall, "steps": steps}
    if prof is not None:
        import io
        import pstats

        prof.disable()
        for key in ("cumulative", "tottime"):
            s = io.StringIO()
            pstats.Stats(prof, stream=s).sort_stats(key).print_stats(40)
            out[f"profile_{key}"] = s.getvalue()
    stats = next(e["stats"] for e in load_report(run_dir)["stages"] if e["stage"] == "quality")
    out["bytes_in"] = stats.get("bytes_in")
    out["docs_in"] = stats.get("docs_in")
    out["docs_out"] = stats.get("docs_out")
    out["sha"] = _tree_sha(run_dir / "quality")
    return out


def _tree_sha(folder: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(folder.rglob("*")):
        if p.is_file():
            h.update(str(p.relative_to(folder)).encode())
            h.update(hashlib.sha256(p.read_bytes()).digest())
    return h.hexdigest()


def _spawn(src: str, extra: list[str]) -> dict:
    # one BLAS thread, as bench_clean_speed: the stage's CPU per core, not OpenBLAS threads
    # spinning on the other core (the coherence fit's Newton steps cost 10x the CPU with them)
    env = {
        **os.environ,
        "PYTHONPATH": str(Path(src).resolve()),
        "OMP_NUM_THREADS": "1",
        "OPENBLAS_NUM_THREADS": "1",
    }
    res = subprocess.run(
        [sys.executable, __file__, "--child", *extra], env=env, capture_output=True, text=True
    )
    if res.returncode != 0:
        raise RuntimeError(f"child failed ({src}): {res.stderr[-3000:]}")
    lines = res.stdout.strip().splitlines()
    return json.loads(lines[-1]) if lines else {}


def regex_pass(run_dir: Path) -> dict:
    """MB/s of one GPT-2-pattern `regex` findall over quality's input texts (dedup's parts)."""
    import pyarrow.parquet as pq
    import regex

    texts = []
    for p in sorted((run_dir / "dedup").glob("part-*.parquet")):
        texts += pq.read_table(p, columns=["text"]).column("text").to_pylist()
    size = sum(len(t.encode("utf-8")) for t in texts)
    rx = regex.compile(GPT2_PATTERN)
    times = []
    for _ in range(3):
        t0 = time.process_time()
        for t in texts:
            rx.findall(t)
        times.append(time.process_time() - t0)
    return {"bytes": size, "cpu_s": statistics.median(times), "mb_per_s": size / 1e6 / min(times)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", default="/work/base/src", help="the before tree's src folder")
    ap.add_argument("--after", default=str(ROOT / "src"), help="the after tree's src folder")
    ap.add_argument("--mb", type=float, default=20.0, help="corpus size, MB of text")
    ap.add_argument("--reference-chars", type=int, default=0, help="0: the stage's default")
    ap.add_argument("--docs-per-part", type=int, default=2000)
    ap.add_argument(
        "--clean-defaults",
        action="store_true",
        help="clean with its defaults (the self reference then reads clean's kept parts)",
    )
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--profile", action="store_true", help="add a cProfile run of the after tree")
    ap.add_argument("--work", default=None)
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--prepare", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--run-dir", help=argparse.SUPPRESS)
    ap.add_argument("--corpus", help=argparse.SUPPRESS)
    ap.add_argument("--dpp", type=int, default=2000, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args)))
        return 0
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from bench_scale import make_corpus

    work = Path(args.work or tempfile.mkdtemp(prefix="bench-qspeed-"))
    work.mkdir(parents=True, exist_ok=True)
    corpus = work / "corpus.jsonl"
    common = [
        f"--corpus={corpus}",
        f"--reference-chars={args.reference_chars}",
        f"--dpp={args.docs_per_part}",
    ] + (["--clean-defaults"] if args.clean_defaults else [])
    if not corpus.exists():
        (work / "corpus.json").write_text(json.dumps(make_corpus(corpus, args.mb)))
    info = json.loads((work / "corpus.json").read_text())
    print(f"corpus: {info}", file=sys.stderr)
    trees = {"before": args.before, "after": args.after}
    # each tree runs its own download/clean/dedup (a tree accepts only its own stage versions;
    # the texts reaching quality are the same, the runs' sha256 below say so)
    ups = {name: work / f"upstream-{name}" for name in trees}
    for name, up in ups.items():
        if not (up / "dedup").exists():
            _spawn(trees[name], [*common, f"--run-dir={up}", "--prepare"])
    runs: dict[str, list[dict]] = {k: [] for k in trees}
    for r in range(args.repeats):
        names = list(trees) if r % 2 == 0 else list(trees)[::-1]  # interleaved, order swapped
        for name in names:
            run_dir = work / f"run-{name}"
            shutil.rmtree(run_dir, ignore_errors=True)
            shutil.copytree(ups[name], run_dir, symlinks=True)
            got = _spawn(trees[name], [*common, f"--run-dir={run_dir}"])
            runs[name].append(got)
            print(f"{name} #{r}: cpu {got['cpu_s']:.2f} s", file=sys.stderr)
    rx = regex_pass(ups["after"])
    out: dict = {"corpus": info, "regex_gpt2_findall": rx, "trees": trees}
    for name, rs in runs.items():
        cpu = statistics.median(r["cpu_s"] for r in rs)
        mbps = rs[0]["bytes_in"] / 1e6 / cpu
        mb = rs[0]["bytes_in"] / 1e6
        step_s = {k: statistics.median(r["steps"].get(k, 0.0) for r in rs) for k in rs[0]["steps"]}
        per_doc = sum(v for k, v in step_s.items() if k in PER_DOCUMENT)
        fixed = sum(v for k, v in step_s.items() if k in FIXED)
        parts = {
            "steps_cpu_s_median": {k: round(v, 3) for k, v in step_s.items()},
            "per_document_cpu_s": round(per_doc, 3),
            "per_document_mb_per_cpu_s": round(mb / per_doc, 3) if per_doc else None,
            "fixed_fits_cpu_s": round(fixed, 3),
            "other_cpu_s": round(cpu - per_doc - fixed, 3),  # imports, maps' glue, reports
        }
        out[name] = {
            "cpu_s_median": round(cpu, 3),
            "cpu_s_all": [round(r["cpu_s"], 3) for r in rs],
            "wall_s_median": round(statistics.median(r["wall_s"] for r in rs), 3),
            "bytes_in": rs[0]["bytes_in"],
            "docs_in": rs[0]["docs_in"],
            "docs_out": rs[0]["docs_out"],
            "mb_per_cpu_s": round(mbps, 3),
            "share_of_regex_pass": round(mbps / rx["mb_per_s"], 3),
            "outputs_sha256": sorted({r["sha"] for r in rs}),
            **parts,
        }
    out["speedup"] = round(out["before"]["cpu_s_median"] / out["after"]["cpu_s_median"], 3)
    out["same_bytes"] = out["before"]["outputs_sha256"] == out["after"]["outputs_sha256"]
    if args.profile:
        run_dir = work / "run-profile"
        shutil.rmtree(run_dir, ignore_errors=True)
        shutil.copytree(up, run_dir, symlinks=True)
        prof = _spawn(args.after, [*common, f"--run-dir={run_dir}", "--profile"])
        (work / "profile.txt").write_text(prof["profile_cumulative"] + prof["profile_tottime"])
        out["profile_file"] = str(work / "profile.txt")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=1) + "\n")
    summary = {k: out[k] for k in ("speedup", "same_bytes")}
    for name in trees:
        keys = ("cpu_s_median", "mb_per_cpu_s", "per_document_mb_per_cpu_s", "fixed_fits_cpu_s")
        summary[name] = {k: out[name][k] for k in keys}
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
