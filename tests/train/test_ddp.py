"""DDP: `torchrun --nproc_per_node 2 -m pipeline pretrain` on CPU (gloo) trains the same steps
as one process at the same global batch: per-step losses equal within float tolerance."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

SRC = Path(__file__).resolve().parents[2] / "src"


def _recipe(path: Path, run: Path, batch_size: int) -> Path:
    block = {
        "run_dir": str(run), "n_layer": 1, "n_head": 2, "d_model": 16, "dropout": 0.0,
        "batch_size": batch_size, "max_steps": 6, "warmup_steps": 2, "lr": 1e-2, "min_lr": 1e-3,
        "eval_every": 3, "save_every": 3, "eval_tokens": 256, "device": "cpu",
    }  # fmt: skip
    path.write_text(json.dumps({"pretrain": block}))  # JSON is YAML
    return path


def _pretrain(cmd_head: list[str], recipe: Path, out: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": str(SRC), "OMP_NUM_THREADS": "1"}
    cmd = [*cmd_head, "-m", "pipeline", "pretrain", "--config", str(recipe), "--out-dir", str(out)]
    done = subprocess.run([*cmd, "-q"], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads((out / "report.json").read_text())


# three Python processes importing torch: ~25 s of the suite on an idle 2-core box
def test_two_gloo_ranks_equal_one_process_at_the_same_global_batch(tiny_run, tmp_path):
    one = _pretrain([sys.executable], _recipe(tmp_path / "one.yaml", tiny_run, 4), tmp_path / "a")
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
    torchrun += ["--nproc_per_node", "2"]
    two = _pretrain(torchrun, _recipe(tmp_path / "two.yaml", tiny_run, 2), tmp_path / "b")
    assert two["world_size"] == 2 and one["world_size"] == 1
    assert two["tokens_per_step"] == one["tokens_per_step"] == 4 * 32
    assert len(two["losses"]) == 6
    torch.testing.assert_close(two["losses"], one["losses"], rtol=1e-5, atol=1e-5)
    ev1, ev2 = one["final"]["shard_eval"]["loss"], two["final"]["shard_eval"]["loss"]
    assert ev2 == pytest.approx(ev1, rel=1e-5)
