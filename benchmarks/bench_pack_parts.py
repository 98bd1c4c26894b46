"""Pack cost against the number of tokenize parts: N one-document parts, one sequence per output
part (the worst case for input x output coupling). Each output part opens only the token files
it takes from ("linear"); the peer is the previous cost model, every output part opening every
input part ("all parts"), emulated on the same code. Reports seconds and np.load calls.
Writes outputs/benchmarks/pack_parts.json. `--sizes 250 1000 --peer-up-to 1000` for the full run.
"""

from __future__ import annotations

import argparse
import collections
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))  # the tests' fake tokenize output and pack runner

import pipeline.stages.pack as pack_mod  # noqa: E402
from helpers import fake_tokenize, run_pack  # noqa: E402
from pipeline.parts import part_name  # noqa: E402

OUT = ROOT / "outputs" / "benchmarks" / "pack_parts.json"


def all_parts(jobs: list[dict], token_paths: list[str]) -> None:
    """The previous cost model: every output part maps every tokenize part."""
    for job in jobs:
        job["token_paths"] = list(token_paths)


def make_parts(base: Path, n: int) -> None:
    fake_tokenize(base, [[50 + i] for i in range(20)])
    tok = base / "tokenize"
    for i in range(20, n):  # copies of 20 distinct parts: writing n parts is not what we time
        for suffix in (".tokens.npy", ".docs.parquet"):
            (tok / part_name(i, suffix)).write_bytes((tok / part_name(i % 20, suffix)).read_bytes())


def timed_pack(base: Path, attach) -> dict:
    opens: collections.Counter = collections.Counter()
    real_load, real_attach = np.load, pack_mod._attach_token_paths

    def counting_load(path, *args, **kwargs):
        opens[Path(path).name] += 1
        return real_load(path, *args, **kwargs)

    pack_mod.np.load, pack_mod._attach_token_paths = counting_load, attach or real_attach
    try:
        shutil.rmtree(base / "pack", ignore_errors=True)
        t0 = time.perf_counter()
        res = run_pack(base, {"seq_len": 64, "sequences_per_part": 1, "by_source": False})
        seconds = time.perf_counter() - t0
    finally:
        pack_mod.np.load, pack_mod._attach_token_paths = real_load, real_attach
    return {
        "seconds": round(seconds, 2),
        "output_parts": res.stats["sequences"],
        "np_load_calls": sum(opens.values()),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--sizes", type=int, nargs="+", default=[250, 1000])
    ap.add_argument("--peer-up-to", type=int, default=250, help="run the peer up to this size")
    args = ap.parse_args()
    rows = []
    for n in args.sizes:
        base = Path(tempfile.mkdtemp(prefix="bench-pack-parts-"))
        try:
            make_parts(base, n)
            row = {"parts": n, "linear": timed_pack(base, None)}
            if n <= args.peer_up_to:
                row["all_parts"] = timed_pack(base, all_parts)
            rows.append(row)
            print(json.dumps(row))
        finally:
            shutil.rmtree(base, ignore_errors=True)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps({"rows": rows}, indent=2) + "\n")


if __name__ == "__main__":
    main()
