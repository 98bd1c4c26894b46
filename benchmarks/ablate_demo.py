"""The worked example of docs/pretrain.md: does the default recipe train a better proxy than the
raw data? Offline and reproducible.

1. The demo corpus (Python's own docs, `download.source: python_docs`), split by a seeded hash
   of the document id: 10 % held out as eval texts (never trained on), 90 % for training.
2. Into the training 90 % inject junk and duplicates: every 4th document (by hash) repeated 1-4
   times exactly plus one near copy (3 % of words swapped); junk documents adding 40 % of the
   document count (navigation boilerplate, symbol soup, digit tables, base64 blobs, one line
   repeated). Written as mix.jsonl.
3. Two data runs on mix.jsonl: `raw` (tokenize, pack, shard: clean/dedup/quality disabled) and
   `default` (recipes/data_demo.yaml's blocks, the same tokenize/pack/shard).
4. `pipeline ablate raw default --config recipes/pretrain_demo.yaml --eval-texts eval.jsonl
   --seeds 0,1,2`.

    python benchmarks/ablate_demo.py [--seeds 0,1,2] [--out outputs/ablate_demo]

Writes outputs/benchmarks/ablate_demo.json (the ablation's rows plus the mix's counts).
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from pipeline.sources.python_docs import generate  # noqa: E402

NAV = "Home | Products | Pricing | Blog | About us | Contact | Login | Sign up | Cart (0)"


def bucket(doc_id: str, salt: str) -> float:
    """A seeded hash of the id in [0, 1): the split and the injections never depend on order."""
    h = hashlib.sha256(f"{salt}:{doc_id}".encode()).digest()
    return int.from_bytes(h[:8], "big") / 2**64


def near_copy(text: str, rng: random.Random) -> str:
    words = text.split(" ")
    for _ in range(max(1, len(words) * 3 // 100)):
        i, j = rng.randrange(len(words)), rng.randrange(len(words))
        words[i], words[j] = words[j], words[i]
    return " ".join(words)


def junk(k: int, rng: random.Random) -> str:
    kind = k % 5
    if kind == 0:
        return "\n".join(NAV for _ in range(rng.randint(20, 60)))
    if kind == 1:
        return " ".join(
            "".join(rng.choice("!@#$%^&*()_+=<>?/|~") for _ in range(rng.randint(2, 9)))
            for _ in range(rng.randint(200, 600))
        )
    if kind == 2:
        rows = rng.randint(50, 150)
        return "\n".join(
            " ".join(str(rng.randint(0, 10**6)) for _ in range(8)) for _ in range(rows)
        )
    if kind == 3:
        return base64.b64encode(rng.randbytes(rng.randint(2000, 6000))).decode()
    line = rng.choice(["click here to subscribe", "buy cheap watches online", "free download now"])
    return "\n".join(f"{line} {line} {line}" for _ in range(rng.randint(30, 90)))


def build_mix(out: Path, seed: int = 0) -> dict:
    rng = random.Random(seed)
    docs = list(generate())
    held = [d for d in docs if bucket(d.id, "eval") < 0.10]
    train = [d for d in docs if bucket(d.id, "eval") >= 0.10]
    rows = [{"id": d.id, "text": d.text} for d in train]
    dups = 0
    for d in train:
        if bucket(d.id, "dup") < 0.25:
            for c in range(rng.randint(1, 4)):
                rows.append({"id": f"{d.id}#copy{c}", "text": d.text})
                dups += 1
            rows.append({"id": f"{d.id}#near", "text": near_copy(d.text, rng)})
            dups += 1
    n_junk = len(train) * 40 // 100
    rows += [{"id": f"junk/{k}", "text": junk(k, rng)} for k in range(n_junk)]
    rng.shuffle(rows)
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "mix.jsonl", "w", encoding="utf-8") as f:
        f.writelines(json.dumps(r) + "\n" for r in rows)
    with open(out / "eval.jsonl", "w", encoding="utf-8") as f:
        f.writelines(json.dumps({"id": d.id, "text": d.text}) + "\n" for d in held)
    return {
        "train_docs": len(train),
        "duplicates_injected": dups,
        "junk_injected": n_junk,
        "mix_docs": len(rows),
        "eval_docs": len(held),
        "eval_bytes": sum(len(d.text.encode()) for d in held),
    }


def recipes(out: Path) -> dict[str, Path]:
    demo = yaml.safe_load((ROOT / "recipes" / "data_demo.yaml").read_text())
    common = {"seed": demo["seed"], "workers": demo["workers"]}
    download = {"source": "jsonl", "path": str(out / "mix.jsonl"), "docs_per_part": 200}
    tail = {k: demo[k] for k in ("tokenize", "pack", "shard")}
    made = {}
    for name, middle in (
        ("raw", {}),
        ("default", {k: demo[k] for k in ("clean", "dedup", "quality")}),
    ):
        recipe = {"name": name, **common, "out_dir": str(out / name), "download": download}
        recipe |= {**middle, **tail}
        path = out / f"data_{name}.yaml"
        path.write_text(yaml.safe_dump(recipe, sort_keys=False))
        made[name] = path
    return made


def run(cmd: list[str]) -> None:
    print("+", " ".join(cmd), file=sys.stderr)
    subprocess.run(cmd, check=True, env={**os.environ, "PYTHONPATH": str(ROOT / "src")})


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=ROOT / "outputs" / "ablate_demo")
    p.add_argument("--seeds", default="0,1,2")
    p.add_argument("--config", type=Path, default=ROOT / "recipes" / "pretrain_demo.yaml")
    p.add_argument("--set", action="append", default=[], help="pretrain overrides")
    args = p.parse_args()
    t0 = time.perf_counter()
    mix = build_mix(args.out)
    print(json.dumps(mix), file=sys.stderr)
    py = sys.executable
    for path in recipes(args.out).values():
        run([py, "-m", "pipeline", "data", "--config", str(path), "-q"])
    sets = [x for s in args.set for x in ("--set", s)]
    abl = args.out / "ablate"
    run(
        [py, "-m", "pipeline", "ablate", str(args.out / "raw"), str(args.out / "default")]
        + ["--config", str(args.config), "--eval-texts", str(args.out / "eval.jsonl")]
        + ["--seeds", args.seeds, "--out-dir", str(abl), "-q", *sets]
    )
    result = json.loads((abl / "ablate.json").read_text())
    reports = {
        name: json.loads((args.out / name / "pipeline_report.json").read_text())
        for name in ("raw", "default")
    }
    docs_out = {
        name: [s["stats"].get("docs_out") for s in r["stages"] if s["stage"] == "tokenize"][0]
        for name, r in reports.items()
    }
    summary = {
        "mix": mix,
        "docs_trained_on": docs_out,
        "seconds": time.perf_counter() - t0,
        **result,
    }
    bench = ROOT / "outputs" / "benchmarks"
    bench.mkdir(parents=True, exist_ok=True)
    (bench / "ablate_demo.json").write_text(json.dumps(summary, indent=2))
    print(abl / "ablate.json")


if __name__ == "__main__":
    main()
