"""Clean's speed per core, before vs after, on real text (issue 27 item 2: >= 6 MB/s per core).

    .venv/bin/python benchmarks/bench_clean_speed.py --before /work/base/src [--mb 20] [--repeats 3]

Corpus: bench_scale.make_corpus (TinyStories, WikiText-2, Dolma CC and C4 pages, Shakespeare
scenes, perturbed copies), `--mb` megabytes of text. Each side (`--before` source tree, and
this checkout's src/) runs `clean_texts` with the default CleanConfig in its own subprocess,
one core, CPU time (time.process_time), repeats interleaved (before, after, before, ...), the
median reported. Each run also times one GPT-2-pattern `regex` findall over the same texts
(the yardstick of issue 27) and returns a sha256 of its decisions, reasons and output texts:
the two sides must agree byte for byte. Each side also reports where its time goes
(normalise, segmentation, each statistic family, PII) in one more run, measured by wrapping
those functions.
Writes outputs/benchmarks/clean_speed.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BENCH = Path(__file__).resolve().parent
OUT = ROOT / "outputs" / "benchmarks" / "clean_speed.json"
GPT2 = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"

# run inside each side's subprocess: PYTHONPATH selects the tree
CHILD = r"""
import hashlib, json, sys, time
import regex
corpus, breakdown = sys.argv[1], sys.argv[2] == "1"
texts = [json.loads(line)["text"] for line in open(corpus, encoding="utf-8")]
mb = sum(len(t.encode("utf-8")) for t in texts) / 1e6
from pipeline.stages.clean import CleanConfig, clean_texts
from pipeline.clean.rules import RULE_NAMES
cfg = CleanConfig()
acc = {}
if breakdown:
    sys.path.insert(0, sys.argv[4])  # benchmarks/: the shared step timer
    from cpu_steps import time_steps
    sc, ts = "pipeline.stages.clean", "pipeline.clean.textstats"
    time_steps(acc, {label: (mod, name) for mod, name, label in [
        (sc, "normalize_text", "normalise"), (sc, "filter_stats_batch", "statistics (all)"),
        (sc, "redact", "pii redaction"), (sc, "digit_hints", "pii digit pre-check"),
        (ts, "segment", "segmentation (classes, words, hashes)"),
        (ts, "_dominant_scripts", "script share"), (ts, "ngram_stats", "n-gram rules"),
        (ts, "stop_word_counts", "stop words"), (ts, "line_stats_batch", "line/paragraph/C4 rules"),
        (ts, "_line_stats", "line rules, per-document path"),
    ]})
clean_texts(texts[:50], cfg)
acc.clear()
t = time.process_time()
b = clean_texts(texts, cfg)
secs = time.process_time() - t
h = hashlib.sha256()
for text, keep, row in zip(b.texts, b.keep, b.fails):
    h.update(bytes([int(keep)]) + ",".join(RULE_NAMES[j] for j in row.nonzero()[0]).encode())
    h.update(text.encode("utf-8") + b"\0")
pat = regex.compile(sys.argv[3])
t = time.process_time()
for x in texts:
    pat.findall(x)
regex_s = time.process_time() - t
print(json.dumps({"mb": mb, "docs": len(texts), "seconds": secs, "regex_seconds": regex_s,
                  "kept": int(b.keep.sum()), "sha256": h.hexdigest(), "breakdown": acc}))
"""


def run_side(src: str, corpus: Path, breakdown: bool) -> dict:
    env = dict(os.environ, PYTHONPATH=src, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, str(corpus), "1" if breakdown else "0", GPT2, str(BENCH)],
        env=env,
        capture_output=True,
        text=True,
    )
    if proc.returncode:
        sys.exit(f"error: the run with PYTHONPATH={src} failed: {proc.stderr.strip()[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", required=True, help="src/ of the tree to compare with")
    ap.add_argument("--mb", type=float, default=20.0, help="megabytes of text")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", default=str(OUT))
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from bench_scale import make_corpus

    sides = {"before": str(Path(args.before).resolve()), "after": str(ROOT / "src")}
    runs: dict[str, list[dict]] = {k: [] for k in sides}
    with tempfile.TemporaryDirectory() as tmp:
        corpus = Path(tmp) / "corpus.jsonl"
        info = make_corpus(corpus, args.mb)
        for r in range(args.repeats):
            for name, src in sides.items():
                res = run_side(src, corpus, breakdown=False)
                runs[name].append(res)
                print(
                    f"{name} #{r}: {res['mb'] / res['seconds']:.2f} MB/s "
                    f"(regex {res['mb'] / res['regex_seconds']:.1f} MB/s)",
                    file=sys.stderr,
                )
        detail = {name: run_side(src, corpus, breakdown=True) for name, src in sides.items()}
    out: dict = {
        "corpus": {**info, "mb": round(runs["after"][0]["mb"], 2)},
        "repeats": args.repeats,
    }
    for name, rs in runs.items():
        secs = statistics.median(r["seconds"] for r in rs)
        regex_s = statistics.median(r["regex_seconds"] for r in rs)
        mb = rs[0]["mb"]
        out[name] = {
            "seconds": round(secs, 3),
            "mb_per_cpu_s": round(mb / secs, 3),
            "regex_gpt2_mb_per_cpu_s": round(mb / regex_s, 2),
            "share_of_one_regex_pass": round(regex_s / secs, 3),
            "kept": rs[0]["kept"],
            "sha256": rs[0]["sha256"],
            "runs_s": [round(r["seconds"], 3) for r in rs],
        }
    out["speedup"] = round(out["before"]["seconds"] / out["after"]["seconds"], 2)
    out["same_output"] = len({r["sha256"] for rs in runs.values() for r in rs}) == 1
    for name, d in detail.items():  # one wrapped run per side, after the timed ones
        total = d["seconds"]
        out[f"{name}_breakdown"] = {
            k: {"seconds": round(v, 3), "share": round(v / total, 3)}
            for k, v in sorted(d["breakdown"].items(), key=lambda kv: -kv[1])
        }
        out[f"{name}_breakdown_total_s"] = round(total, 3)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=1) + "\n")
    b, a = out["before"], out["after"]
    print(
        f"before {b['mb_per_cpu_s']} MB/s, after {a['mb_per_cpu_s']} MB/s per core "
        f"(x{out['speedup']}); one regex pass {a['regex_gpt2_mb_per_cpu_s']} MB/s: clean is "
        f"{a['share_of_one_regex_pass']:.0%} of it; same output: {out['same_output']}; "
        f"wrote {args.out}",
        file=sys.stderr,
    )


if __name__ == "__main__":
    main()
