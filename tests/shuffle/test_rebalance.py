"""`pipeline shuffle`: rebalance conserves rows, balances sizes, cleans up on failure."""

from __future__ import annotations

import json
import os
import signal

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pipeline.rebalance as shuffle_mod
from pipeline.cli import main
from pipeline.errors import DataError
from pipeline.io import sha256_file
from pipeline.rebalance import shuffle_shards
from pipeline.shards import npz_member
from pipeline.shuffle import ShuffleStats, apportion

SEQ = 6


def make_shards(folder, sizes, metadata=True, compressed=False):
    """Unbalanced shards; row r (global) has input_ids all = r and label = 10 r."""
    folder.mkdir(parents=True)
    r = 0
    for i, n in enumerate(sizes):
        ids = np.repeat(np.arange(r, r + n, dtype=np.uint32)[:, None], SEQ, axis=1)
        save = np.savez_compressed if compressed else np.savez
        save(
            folder / f"shard_{i:06d}.npz",
            input_ids=ids,
            segment_ids=(ids % 3).astype(np.uint16),
            label=np.arange(r, r + n, dtype=np.int64) * 10,
        )
        r += n
    if metadata:
        meta = {
            "num_samples": r,
            "seq_len": SEQ,
            "pre_shuffled": False,
            "seed": None,
            "eos_id": 1,
            "version": 1,
        }
        (folder / "metadata.json").write_text(json.dumps(meta))
    return r


def read_all(folder):
    meta = json.loads((folder / "metadata.json").read_text())
    data = {k: [] for k in meta["fields"]}
    for s in meta["shards"]:
        with np.load(folder / s["file"]) as z:
            for k in data:
                data[k].append(z[k])
    return meta, {k: np.concatenate(v) for k, v in data.items()}


def no_temp_left(parent):
    return not [p.name for p in parent.iterdir() if ".tmp" in p.name]


def test_rebalance_conserves_rows_and_balances(tmp_path):
    n = make_shards(tmp_path / "in", [3, 50, 17, 0, 30])
    (tmp_path / "in" / "eval").mkdir()
    (tmp_path / "in" / "eval" / "shard_000000.npz").write_bytes(b"eval bytes")
    meta = shuffle_shards(tmp_path / "in", tmp_path / "out", 16, seed=3)
    got_meta, data = read_all(tmp_path / "out")
    assert got_meta == meta
    assert meta["shard_sizes"] == [16] * 6 + [4] and meta["num_samples"] == n == 100
    assert sorted(data["input_ids"][:, 0].tolist()) == list(range(100))
    # the fields stay aligned row by row
    assert (data["input_ids"] == data["input_ids"][:, :1]).all()
    assert np.array_equal(data["label"], data["input_ids"][:, 0].astype(np.int64) * 10)
    assert np.array_equal(data["segment_ids"], (data["input_ids"] % 3).astype(np.uint16))
    assert meta["pre_shuffled"] is True and meta["seed"] == 3 and meta["eos_id"] == 1
    assert meta["field_dtypes"] == {
        "input_ids": "uint32",
        "segment_ids": "uint16",
        "label": "int64",
    }
    assert (tmp_path / "out" / "eval" / "shard_000000.npz").read_bytes() == b"eval bytes"
    for s in meta["shards"]:
        assert s["sha256"] == sha256_file(tmp_path / "out" / s["file"])
    assert sorted(p.name for p in (tmp_path / "out").iterdir())[-1] == "shard_000006.npz"
    assert no_temp_left(tmp_path)
    assert isinstance(npz_member(tmp_path / "out" / "shard_000000.npz", "input_ids"), np.memmap)


def test_deterministic_and_seeded(tmp_path):
    make_shards(tmp_path / "in", [40, 5, 25], metadata=False, compressed=True)
    hashes = []
    for name, seed in (("a", 1), ("b", 1), ("c", 2)):
        meta = shuffle_shards(tmp_path / "in", tmp_path / name, 20, seed)
        hashes.append([s["sha256"] for s in meta["shards"]])
    assert hashes[0] == hashes[1] != hashes[2]
    assert "seq_len" in meta and meta["version"] == 1


def test_shuffle_stats_are_good_on_many_rows(tmp_path):
    make_shards(tmp_path / "in", [2000, 100, 900, 1000])
    q = shuffle_shards(tmp_path / "in", tmp_path / "out", 500, 0)["shuffle_stats"]
    assert abs(q["spearman"]) < 0.05
    assert 0.8 < q["same_source_ratio"] < 1.2
    assert q["max_share_deviation_samples"] <= 1.0


@pytest.mark.parametrize("exc", [RuntimeError("disk full"), KeyboardInterrupt()])
def test_failure_midway_leaves_nothing(tmp_path, monkeypatch, exc):
    make_shards(tmp_path / "in", [30, 10, 20])
    real, calls = shuffle_mod.save_npz, []

    def flaky(path, arrays):
        calls.append(path)
        if len(calls) == 2:
            raise exc
        real(path, arrays)

    monkeypatch.setattr(shuffle_mod, "save_npz", flaky)
    with pytest.raises(type(exc)):
        shuffle_shards(tmp_path / "in", tmp_path / "out", 10, 0)
    assert not (tmp_path / "out").exists()
    assert no_temp_left(tmp_path)


def test_sigterm_midway_cleans_up(tmp_path, monkeypatch):
    make_shards(tmp_path / "in", [30, 10, 20])
    real = shuffle_mod.save_npz

    def killed(path, arrays):
        real(path, arrays)
        os.kill(os.getpid(), signal.SIGTERM)

    monkeypatch.setattr(shuffle_mod, "save_npz", killed)
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(KeyboardInterrupt):
        shuffle_shards(tmp_path / "in", tmp_path / "out", 10, 0)
    assert not (tmp_path / "out").exists() and no_temp_left(tmp_path)
    assert signal.getsignal(signal.SIGTERM) == before


def test_bad_inputs(tmp_path):
    make_shards(tmp_path / "in", [5, 5])
    np.savez(tmp_path / "in" / "shard_000002.npz", input_ids=np.zeros((3, SEQ + 1), np.uint32))
    with pytest.raises(DataError, match="differ from shard_000000.npz"):
        shuffle_shards(tmp_path / "in", tmp_path / "out", 4, 0)
    np.savez(tmp_path / "in" / "shard_000002.npz", input_ids=np.zeros((3, SEQ)), label=np.zeros(4))
    with pytest.raises(DataError, match="do not share the first dimension"):
        shuffle_shards(tmp_path / "in", tmp_path / "out", 4, 0)
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x")
    with pytest.raises(DataError, match="exists and is not empty"):
        shuffle_shards(tmp_path / "in", tmp_path / "full", 4, 0)
    with pytest.raises(DataError, match="no .npz shards"):
        shuffle_shards(tmp_path / "full", tmp_path / "out", 4, 0)
    assert no_temp_left(tmp_path)


def _shuffle_args(tmp_path, seed: int) -> list[str]:
    """`pipeline shuffle` from tmp_path/in to tmp_path/out, shards of 8 samples."""
    out = ["shuffle", "--input-dir", str(tmp_path / "in"), "--output-dir", str(tmp_path / "out")]
    return [*out, "--shard-size", "8", "--seed", str(seed)]


def test_cli(tmp_path, capsys):
    make_shards(tmp_path / "in", [7, 13])
    args = _shuffle_args(tmp_path, seed=4)
    assert main(args) == 0
    assert "20 samples in 3 shards" in capsys.readouterr().out
    assert main(args) == 1
    assert "exists and is not empty" in capsys.readouterr().err


@settings(max_examples=80, deadline=None)
@given(st.lists(st.integers(0, 60), min_size=1, max_size=8), st.integers(1, 40))
def test_apportion_takes_every_row_once_proportionally(rows, shard_size):
    total = sum(rows)
    out = [shard_size] * (total // shard_size) + (
        [total % shard_size] if total % shard_size else []
    )
    plan = apportion(np.array(rows), out)
    assert plan.sum(axis=1).tolist() == out
    assert plan.sum(axis=0).tolist() == rows
    if total:
        cum = np.cumsum(plan, axis=0)
        target = np.cumsum(out)[:, None] * np.array(rows)[None, :] / total
        assert np.abs(cum - target).max() < 2


def test_quality_worked_example():
    """Identity order from one source: spearman 1, every neighbour same source (ratio 1/1)."""
    q = ShuffleStats(np.array([4]))
    q.add(np.zeros(4, np.int64), np.arange(4))
    r = q.result()
    assert r["spearman"] == 1.0 and r["same_source_ratio"] == 1.0
    q = ShuffleStats(np.array([2, 2]))
    q.add(np.array([0, 0]), np.array([3, 2]))  # reversed order: spearman -1
    q.add(np.array([1, 1]), np.array([1, 0]))
    r = q.result()
    assert r["spearman"] == -1.0 and r["max_share_deviation_samples"] == 1.0


def test_shard_stage_folder_layout(tmp_path):
    """A folder with train/ and eval/ (the shard stage's): train/ is shuffled into out/train."""
    make_shards(tmp_path / "in" / "train", [9, 2, 30])
    make_shards(tmp_path / "in" / "eval", [4])
    meta = shuffle_shards(tmp_path / "in", tmp_path / "out", 10, 1)
    got, data = read_all(tmp_path / "out" / "train")
    assert got == meta and meta["shard_sizes"] == [10, 10, 10, 10, 1]
    assert sorted(data["input_ids"][:, 0].tolist()) == list(range(41))
    assert sorted(p.name for p in (tmp_path / "out" / "eval").iterdir()) == sorted(
        p.name for p in (tmp_path / "in" / "eval").iterdir()
    )
    assert no_temp_left(tmp_path)


CHILD = """
import sys, time
from pathlib import Path
import pipeline.rebalance as r
from pipeline.cli import main
real = r.save_npz
def save_then_wait(path, arrays):  # first output shard written: tell the test, then wait
    real(path, arrays)
    Path(sys.argv[1]).touch()
    time.sleep(60)
r.save_npz = save_then_wait
sys.exit(main(sys.argv[2:]))
"""


def test_ctrl_c_on_the_real_command_leaves_nothing(tmp_path):
    """SIGINT to the CLI mid-run (after its first output shard): exit 130, no output, no temp.
    The child waits after its first shard, so the signal always lands mid-run."""
    import subprocess
    import sys
    import time

    make_shards(tmp_path / "in", [30, 10, 20])
    marker = tmp_path / "first-shard-written"
    cmd = [
        sys.executable,
        "-c",
        CHILD,
        str(marker),
        *_shuffle_args(tmp_path, seed=1),
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not marker.exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert [p for p in tmp_path.iterdir() if ".tmp-shuffle" in p.name]  # mid-run indeed
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "interrupted" in err
    assert not (tmp_path / "out").exists()
    assert no_temp_left(tmp_path)


def test_bad_arguments(tmp_path):
    from pipeline.errors import PipelineError

    make_shards(tmp_path / "in", [5])
    with pytest.raises(PipelineError, match="--shard-size must be >= 1, got 0"):
        shuffle_shards(tmp_path / "in", tmp_path / "out", 0, 1)
    with pytest.raises(PipelineError, match="--seed must be >= 0, got -1"):
        shuffle_shards(tmp_path / "in", tmp_path / "out", 2, -1)
    with pytest.raises(DataError, match="must differ from the input folder"):
        shuffle_shards(tmp_path / "in" / "..", tmp_path, 2, 1)


def test_sigkill_midway_temp_is_swept_by_the_next_run(tmp_path):
    """kill -9 leaves the temp folder (no handler runs); the next shuffle removes it and
    writes the same bytes as an uninterrupted run."""
    import subprocess
    import sys
    import time

    make_shards(tmp_path / "in", [30, 10, 20])
    marker = tmp_path / "first-shard-written"
    cmd = [sys.executable, "-c", CHILD, str(marker), *_shuffle_args(tmp_path, seed=1)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while not marker.exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline
        time.sleep(0.01)
    proc.kill()
    proc.communicate()
    assert not no_temp_left(tmp_path)  # the killed run's temp folder is there
    assert not (tmp_path / "out").exists()
    assert main(_shuffle_args(tmp_path, seed=1)) == 0
    assert no_temp_left(tmp_path)
    shuffle_shards(tmp_path / "in", tmp_path / "ref", 8, 1)
    for p in (tmp_path / "ref").iterdir():
        if p.suffix == ".npz":
            assert sha256_file(p) == sha256_file(tmp_path / "out" / p.name)


def test_a_live_runs_temp_is_left_alone(tmp_path):
    live = tmp_path / f".out.tmp-shuffle-{os.getppid()}"
    dead = tmp_path / ".out.tmp-shuffle-999999999"
    live.mkdir()
    dead.mkdir()
    assert shuffle_mod.sweep_stale_temps(tmp_path / "out") == [dead]
    assert live.is_dir() and not dead.exists()
