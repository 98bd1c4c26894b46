"""Make tests/data/old_layout_crash/: a run folder killed mid-stage by the code BEFORE the house
layout (commit 9311ba7), for tests/test_old_layout_resume.py. Kept to show how the data was made:

    git worktree add --detach /tmp/old 9311ba7
    PYTHONPATH=/tmp/old/src python tests/data/make_old_layout_crash.py tests/data/old_layout_crash

It runs RECIPE in-process and dies (os._exit, as kill -9) at the crash point where a stage's
second part is about to be written: part 0's task is already recorded in the ledger (.resume/).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
STAGE = "download"  # the one stage whose fingerprint main has not changed since (docs below)
AT = "before writing part-00001.parquet"  # the second part's write: part 0's task is recorded


def main(out: Path) -> None:
    from pipeline.runner import run_recipe  # the OLD layout's module path

    from pipeline import io
    from pipeline.recipe import build_recipe

    recipe = yaml.safe_load((HERE / "old_layout_recipe.yaml").read_text())
    if out.exists():
        shutil.rmtree(out)
    run_dir = out / "run"
    recipe["out_dir"] = str(run_dir)
    seen = {"started": False}

    def hook(count: int, label: str) -> None:
        if label.startswith(f"{STAGE}: before mkdir .tmp-{STAGE}"):
            seen["started"] = True
        elif seen["started"] and label == AT:
            (out / "crashed_at.json").write_text(json.dumps({"point": count, "label": label}))
            os._exit(86)

    io.CRASH_HOOK.append(hook)
    run_recipe(build_recipe(recipe), progress=False)
    raise SystemExit("the run finished: no crash point matched")


if __name__ == "__main__":
    main(Path(sys.argv[1]).resolve())
