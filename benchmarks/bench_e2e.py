"""End-to-end CPU benchmark (not CI): the whole data pipeline on a real-text corpus, per-stage
MB per CPU-second (driver and worker processes together), the driver's serial share, and each
stage's rate against the machine's own limits (one GPT-2-pattern `regex` findall pass,
`json.loads` of the JSONL lines, xxh3-128 of the text), all measured in the same invocation.

    .venv/bin/python benchmarks/bench_e2e.py [--mb 80] [--workers 1,2] [--repeats 1] \
        [--src /work/base/src --src src]

Corpus: bench_scale.py's (TinyStories, WikiText-2, Dolma CC, C4, Tiny Shakespeare from
/work/shared/corpora, perturbed copies and 4% exact/near duplicates) until `--mb` MB of text,
as one JSONL file. Recipe: recipes/data_demo.yaml with that file as a `jsonl` download source
(2,000 documents per part) and shards of 1,024 sequences; everything else is the demo's.

Each (repeat, worker count, source tree) runs in its own subprocess with PYTHONPATH set to the
tree, interleaved: repeat 1 runs every tree at 1 worker, then every tree at 2, then repeat 2...
CPU time of a stage is the change, around the stage's `run`, of the CPU time of the driver and
of every process under it (the pool's forkserver and workers: /proc utime+stime of live ones,
plus cutime+cstime of the ones they reaped). `serial_share` is the driver's CPU while no
executor map of more than one item is in flight (work moved into a one-task map runs inline and
still counts; work a driver thread does while a map runs does not), plus the
runner's CPU between stages, over all CPU; `driver_cpu_share` counts all the driver's CPU;
`serial_wall_share` is the wall time with no such map in flight (Amdahl's serial part). Medians
over repeats (`serial_share` and the runner's CPU: each repeat's own, then the median).

Before every run the regex pass is timed again on `--clock-mb` MB (the host's speed drifts over
a long invocation on a shared machine): `share_of_regex_pass_per_run` is each run's rate over
the pass timed just before it, then the median (the table prints it; `share_of_regex_pass`
divides by the limits' median at the start). Writes outputs/benchmarks/e2e.json (`--out`).
`--mb 40` with two trees needs ~4 CPU-minutes per tree (under 10 minutes of wall on 2 idle
cores, an estimate from the CPU-seconds); under load it stretches (`--mb 20`, two trees, load
average ~14: 22 minutes). `--workers 2` alone halves it and still gives the serial share.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "outputs" / "benchmarks" / "e2e.json"
RECIPE = ROOT / "recipes" / "data_demo.yaml"
TICK = os.sysconf("SC_CLK_TCK")
# GPT-2's pre-tokenizer split (tiktoken's r50k / HF's ByteLevel): the yardstick regex pass
GPT2 = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""


# ---------------------------------------------------------------- CPU of a process tree


def _children_of() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            kids.setdefault(ppid, []).append(int(entry))
    return kids


def _proc_cpu(pid: int) -> float:
    """utime + stime + cutime + cstime of a live process, seconds (0 if it is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return sum(int(x) for x in fields[11:15]) / TICK  # fields 14-17 of proc(5)


def tree_cpu() -> tuple[float, float]:
    """(driver CPU s, CPU s of every other process under it, reaped ones included)."""
    me = resource.getrusage(resource.RUSAGE_SELF)
    reaped = resource.getrusage(resource.RUSAGE_CHILDREN)
    kids = _children_of()
    others, todo = 0.0, list(kids.get(os.getpid(), []))
    while todo:
        pid = todo.pop()
        others += _proc_cpu(pid)
        todo += kids.get(pid, [])
    return me.ru_utime + me.ru_stime, others + reaped.ru_utime + reaped.ru_stime


# ---------------------------------------------------------------- one run (child process)


def _self_cpu() -> float:
    me = resource.getrusage(resource.RUSAGE_SELF)  # every thread of the driver
    return me.ru_utime + me.ru_stime


class MapClock:
    """Wall time during which a map of 2+ items is in flight on a pool of 2+ workers, and the
    driver's CPU in those windows (work overlapped with the workers: a driver thread)."""

    def __init__(self) -> None:
        self.parallel = 0.0
        self.overlapped_cpu = 0.0
        self.lock = threading.Lock()

    def install(self) -> None:
        from pipeline.executor import Executor

        orig, clock = Executor._map, self

        def timed(ex, fn, items, bar):
            if ex.workers == 1 or len(items) <= 1:
                return orig(ex, fn, items, bar)
            t0, c0 = time.perf_counter(), _self_cpu()
            try:
                return orig(ex, fn, items, bar)
            finally:
                with clock.lock:
                    clock.parallel += time.perf_counter() - t0
                    clock.overlapped_cpu += _self_cpu() - c0

        Executor._map = timed


def run_child(args: argparse.Namespace) -> dict:
    import yaml

    import pipeline
    import pipeline.stages as stages_mod
    from pipeline.recipe import build_recipe
    from pipeline.report import load_report
    from pipeline.run.runner import run_recipe

    clock = MapClock()
    clock.install()
    marks: dict[str, dict] = {}
    for name, stage in list(stages_mod.STAGES.items()):

        def wrapped(cfg, ctx, _run=stage.run, _name=name):
            d0, o0 = tree_cpu()
            w0, p0, v0 = time.perf_counter(), clock.parallel, clock.overlapped_cpu
            try:
                return _run(cfg, ctx)
            finally:
                d1, o1 = tree_cpu()
                wall = time.perf_counter() - w0
                marks[_name] = {
                    "cpu_s": d1 + o1 - d0 - o0,
                    "driver_cpu_s": d1 - d0,
                    # the driver's CPU while no multi-item map ran: nothing overlapped it
                    "serial_cpu_s": d1 - d0 - (clock.overlapped_cpu - v0),
                    "wall_s": wall,
                    "serial_wall_s": wall - (clock.parallel - p0),
                }

        stages_mod.STAGES[name] = dataclasses.replace(stage, run=wrapped)
    raw = yaml.safe_load(RECIPE.read_text(encoding="utf-8"))
    raw.update(out_dir=args.run_dir, workers=args.workers)
    raw["download"] = {"source": "jsonl", "path": args.corpus, "docs_per_part": args.docs_per_part}
    raw["shard"] = {**raw.get("shard", {}), "shard_size": 1024}
    d0, o0 = tree_cpu()
    w0 = time.perf_counter()
    run_recipe(build_recipe(raw), progress=False)
    wall = time.perf_counter() - w0
    time.sleep(0.3)  # the forkserver reaps the pool's workers (their CPU moves to its cutime)
    d1, o1 = tree_cpu()
    report = load_report(Path(args.run_dir))
    stages = {}
    for entry in report["stages"]:
        name, st = entry["stage"], entry["stats"]
        stages[name] = {
            **{k: round(v, 3) for k, v in marks[name].items()},
            "bytes_in": st.get("bytes_in"),
            "docs_in": st.get("docs_in"),
            "docs_out": st.get("docs_out"),
        }
        for key in ("encode_seconds", "train_seconds", "merge_seconds", "tokens_out"):
            if key in st:
                stages[name][key] = st[key]
    return {
        "pipeline_file": pipeline.__file__,
        "wall_s": round(wall, 3),
        "cpu_s": round(d1 + o1 - d0 - o0, 3),
        "driver_cpu_s": round(d1 - d0, 3),
        "stages": stages,
    }


# ---------------------------------------------------------------- the machine's limits


def limits(corpus: Path, sample_mb: float, repeats: int) -> dict:
    """MB/s of one core (CPU time, median of `repeats`) for a GPT-2 regex findall over the
    texts, json.loads over the lines, and xxh3-128 over the UTF-8 texts, on the corpus's
    first `sample_mb` MB of text."""
    import regex
    import xxhash

    lines, texts, size = [], [], 0
    with open(corpus, encoding="utf-8") as f:
        for line in f:
            lines.append(line)
            texts.append(json.loads(line)["text"])
            size += len(texts[-1].encode("utf-8"))
            if size >= sample_mb * 1e6:
                break
    encoded = [t.encode("utf-8") for t in texts]
    pat = regex.compile(GPT2)
    jsonl_bytes = sum(len(x.encode("utf-8")) for x in lines)

    def rate(fn, nbytes: int) -> float:
        runs = []
        for _ in range(repeats):
            t0 = time.process_time()
            fn()
            runs.append(time.process_time() - t0)
        return round(nbytes / 1e6 / statistics.median(runs), 2)

    return {
        "sample_text_mb": round(size / 1e6, 2),
        "regex_gpt2_findall_mb_per_s": rate(lambda: [pat.findall(t) for t in texts], size),
        "json_loads_mb_per_s": rate(lambda: [json.loads(x) for x in lines], jsonl_bytes),
        "xxh3_128_mb_per_s": rate(lambda: [xxhash.xxh3_128_digest(b) for b in encoded], size),
    }


class RegexClock:
    """The regex yardstick again beside every run: the host's speed drifts over a long
    invocation (shared machines), so each run's share of a regex pass is taken against the
    pass timed just before it, on the corpus's first `sample_mb` MB of text (one pass)."""

    def __init__(self, corpus: Path, sample_mb: float) -> None:
        import regex

        self.texts, self.size = [], 0
        with open(corpus, encoding="utf-8") as f:
            for line in f:
                self.texts.append(json.loads(line)["text"])
                self.size += len(self.texts[-1].encode("utf-8"))
                if self.size >= sample_mb * 1e6:
                    break
        self.pat = regex.compile(GPT2)
        self.mb_per_s(1)  # warm: the first pass pays the pattern's and the pages' first touches

    def mb_per_s(self, passes: int = 3) -> float:
        """The median of `passes` timed passes (one pass of ~0.3 s varied by +-30% here)."""
        runs = []
        for _ in range(passes):
            t0 = time.process_time()
            for t in self.texts:
                self.pat.findall(t)
            runs.append(time.process_time() - t0)
        return round(self.size / 1e6 / max(statistics.median(runs), 1e-9), 2)


# ---------------------------------------------------------------- orchestration


def child(src: Path, corpus: Path, run_dir: Path, workers: int, docs_per_part: int) -> dict:
    env = {**os.environ, "PYTHONPATH": str(src)}
    cmd = [sys.executable, __file__, "--child", f"--corpus={corpus}", f"--run-dir={run_dir}"]
    cmd += [f"--workers={workers}", f"--docs-per-part={docs_per_part}"]
    res = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=ROOT)
    if res.returncode != 0:
        raise RuntimeError(f"{src} workers={workers} failed:\n{res.stderr[-3000:]}")
    return json.loads(res.stdout.strip().splitlines()[-1])


def summarise(runs: list[dict], text_bytes: int, lim: dict) -> dict:
    """Medians over repeats of one (tree, workers): per stage and end to end."""
    regex_rate = lim["regex_gpt2_findall_mb_per_s"]
    med = statistics.median
    total_cpu = med(r["cpu_s"] for r in runs)
    out: dict = {"stages": {}}
    for name in runs[0]["stages"]:
        rows = [r["stages"][name] for r in runs]
        cpu = med(x["cpu_s"] for x in rows)
        bytes_in = rows[0]["bytes_in"] or text_bytes
        rate = bytes_in / 1e6 / max(cpu, 1e-9)
        out["stages"][name] = {
            "cpu_s": round(cpu, 2),
            "driver_cpu_s": round(med(x["driver_cpu_s"] for x in rows), 2),
            "serial_cpu_s": round(med(x.get("serial_cpu_s", x["driver_cpu_s"]) for x in rows), 2),
            "serial_wall_s": round(med(x["serial_wall_s"] for x in rows), 2),
            "wall_s": round(med(x["wall_s"] for x in rows), 2),
            "mb_in": round(bytes_in / 1e6, 2),
            "mb_per_cpu_s": round(rate, 3),  # the stage's own input per CPU-second
            "share_of_cpu": round(cpu / total_cpu, 3),
            "share_of_regex_pass": round(rate / regex_rate, 3),
            "docs_in": rows[0]["docs_in"],
            "docs_out": rows[0]["docs_out"],
        }
        tok = [x for x in rows if "encode_seconds" in x]
        if tok:  # encoding alone: summed per-part encode wall time (= CPU on an idle machine)
            enc = med(x["encode_seconds"] for x in tok)
            out["stages"][name]["encode_mb_per_s"] = round(bytes_in / 1e6 / enc, 3)
            out["stages"][name]["encode_share_of_regex_pass"] = round(
                bytes_in / 1e6 / enc / regex_rate, 3
            )
            out["stages"][name]["bpe_train_s"] = med(x.get("merge_seconds", 0) for x in tok)
    driver = med(r["driver_cpu_s"] for r in runs)
    wall = med(r["wall_s"] for r in runs)
    stages = out["stages"].values()
    stage_serial = sum(s["serial_wall_s"] for s in stages)
    # per repeat, then the median: a median of totals minus a sum of per-stage medians can
    # fall below zero when repeats vary by more than the runner's share
    runners, shares = [], []
    for r in runs:
        between = r["cpu_s"] - sum(x["cpu_s"] for x in r["stages"].values())  # the driver's
        serial_r = sum(x.get("serial_cpu_s", x["driver_cpu_s"]) for x in r["stages"].values())
        runners.append(between)
        shares.append((serial_r + between) / r["cpu_s"])
    runner = med(runners)
    e2e = text_bytes / 1e6 / total_cpu
    # each run against the regex pass timed just before it (RegexClock), then the median
    clocked = [r for r in runs if r.get("regex_mb_per_s")]
    if clocked:
        out["regex_mb_per_s_per_run"] = [r["regex_mb_per_s"] for r in clocked]
        out["share_of_regex_pass_per_run"] = round(
            med(text_bytes / 1e6 / r["cpu_s"] / r["regex_mb_per_s"] for r in clocked), 3
        )
        for name, st in out["stages"].items():
            b = st["mb_in"]
            st["share_of_regex_pass_per_run"] = round(
                med(
                    b / max(r["stages"][name]["cpu_s"], 1e-9) / r["regex_mb_per_s"] for r in clocked
                ),
                3,
            )
    out.update(
        cpu_s=round(total_cpu, 2),
        wall_s=round(wall, 2),
        driver_cpu_s=round(driver, 2),
        mb_per_cpu_s=round(e2e, 3),
        share_of_regex_pass=round(e2e / regex_rate, 3),
        driver_cpu_share=round(driver / total_cpu, 4),  # driver CPU (all its threads) / all CPU
        # driver CPU that no multi-item map overlapped, plus the runner's between stages
        serial_share=round(med(shares), 4),
        serial_wall_share=round(
            (stage_serial + (wall - sum(s["wall_s"] for s in stages))) / wall, 4
        ),
        runner_cpu_s=round(runner, 2),
        runs=len(runs),
    )
    return out


def table(results: dict) -> str:
    """A markdown table: one row per stage, one column pair per (tree, workers)."""
    keys = list(results["runs"])
    head = "| stage | " + " | ".join(f"{k} MB/CPU-s (regex share)" for k in keys) + " |"
    lines = [head, "|---" * (len(keys) + 1) + "|"]
    stages = list(results["runs"][keys[0]]["stages"])
    for name in stages:
        cells = []
        for k in keys:
            s = results["runs"][k]["stages"][name]
            share = s.get("share_of_regex_pass_per_run", s["share_of_regex_pass"])
            cells.append(f"{s['mb_per_cpu_s']:.2f} ({share:.0%})")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    runs = [results["runs"][k] for k in keys]
    shares = [r.get("share_of_regex_pass_per_run", r["share_of_regex_pass"]) for r in runs]
    cells = [f"**{r['mb_per_cpu_s']:.2f}** ({x:.0%})" for r, x in zip(runs, shares, strict=True)]
    lines.append("| end to end | " + " | ".join(cells) + " |")
    cells = [f"{r['serial_share']:.1%} cpu, {r['serial_wall_share']:.1%} wall" for r in runs]
    lines.append("| driver serial share | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=float, default=80.0, help="corpus size in MB of text")
    ap.add_argument("--workers", default="1,2", help="worker counts, comma-separated")
    ap.add_argument("--repeats", type=int, default=1, help="interleaved runs of each config")
    ap.add_argument(
        "--src",
        action="append",
        type=Path,
        default=None,
        help="source tree to run (repeatable; default: this checkout's src)",
    )
    ap.add_argument("--docs-per-part", type=int, default=2000)
    ap.add_argument("--limit-mb", type=float, default=8.0, help="text MB the limits time")
    ap.add_argument(
        "--clock-mb",
        type=float,
        default=2.0,
        help="text MB of the regex pass timed before every run (0: none)",
    )
    ap.add_argument("--work", default=None, help="work folder (default: a new temp dir)")
    ap.add_argument("--out", type=Path, default=OUT, help="JSON file to write")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--corpus", help=argparse.SUPPRESS)
    ap.add_argument("--run-dir", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        args.workers = int(args.workers)
        print(json.dumps(run_child(args)))
        return 0
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from bench_scale import make_corpus  # the corpus only: no pipeline import here

    srcs = [s.resolve() for s in (args.src or [ROOT / "src"])]
    workers = [int(w) for w in args.workers.split(",") if w]
    work = Path(args.work or tempfile.mkdtemp(prefix="bench-e2e-"))
    work.mkdir(parents=True, exist_ok=True)
    corpus = work / "corpus.jsonl"
    t0 = time.perf_counter()
    info = make_corpus(corpus, args.mb)
    info["generate_seconds"] = round(time.perf_counter() - t0, 1)
    print(f"corpus: {info}", file=sys.stderr)
    lim = limits(corpus, min(args.limit_mb, args.mb), 3)
    print(f"limits: {lim}", file=sys.stderr)
    clock = RegexClock(corpus, min(args.clock_mb, args.mb)) if args.clock_mb > 0 else None
    raw: dict[str, list[dict]] = {}
    for rep in range(args.repeats):
        for w in workers:
            for i, src in enumerate(srcs):
                key = f"{src}:w{w}" if len(srcs) > 1 else f"w{w}"
                run_dir = work / f"run-{i}-w{w}-r{rep}"
                regex_now = clock.mb_per_s() if clock else None
                t1 = time.perf_counter()
                got = child(src, corpus, run_dir, w, args.docs_per_part)
                if regex_now:
                    got["regex_mb_per_s"] = regex_now
                raw.setdefault(key, []).append(got)
                mbps = info["text_bytes"] / 1e6 / got["cpu_s"]
                print(
                    f"{key} repeat {rep}: {got['cpu_s']:.1f} CPU-s ({mbps:.2f} MB/CPU-s), "
                    f"driver {got['driver_cpu_s']:.1f} s, wall {got['wall_s']:.1f} s, "
                    f"regex pass just before {regex_now} MB/s "
                    f"(ran {time.perf_counter() - t1:.0f} s)",
                    file=sys.stderr,
                )
                subprocess.run(["rm", "-rf", str(run_dir)], check=False)
    results = {
        "benchmark": "e2e",
        "corpus": info,
        "cpus": os.cpu_count(),
        "limits": lim,
        "srcs": [str(s) for s in srcs],
        "runs": {k: summarise(v, info["text_bytes"], lim) for k, v in raw.items()},
        "raw": raw,
    }
    results["table"] = table(results)
    print(results["table"])
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
