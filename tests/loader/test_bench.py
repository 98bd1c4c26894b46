"""`pipeline bench`: the JSON record, the table, progress on stderr, presets and orders."""

from __future__ import annotations

import io
import json
import sys

import pytest

from pipeline.cli import main
from pipeline.loader.bench import BenchConfig, plan_steps, run_bench
from pipeline.loader.dataset import ShardedTokenDataset

from .conftest import write_shards


class TTY(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture
def shards(tmp_path):
    return write_shards(tmp_path / "shard" / "train", [40, 40, 40], seq_len=16, pre_shuffled=True)


def test_cli_writes_json_and_table(shards, tmp_path, capsys, monkeypatch):
    out = tmp_path / "bench"
    argv = ["bench", "--shards", str(shards), "--preset", "cache", "--order", "sequential",
            "--batch-size", "8", "--steps", "40", "--out-dir", str(out)]  # fmt: skip
    monkeypatch.setattr(sys, "stderr", TTY())
    assert main(argv) == 0
    progress = sys.stderr.getvalue()
    stdout = capsys.readouterr().out
    assert "bench: 40/40 batches" in progress  # the progress line, on stderr only
    files = list(out.glob("*.json"))
    assert len(files) == 1 and str(files[0]) in stdout
    r = json.loads(files[0].read_text())
    for key in ("commit", "hardware", "versions", "command", "samples_per_s", "tokens_per_s",
                "mb_per_s", "latency_p50_ms", "latency_p99_ms", "cache_hit_rate",
                "shards_per_batch", "peak_rss_mb", "stall_fraction"):  # fmt: skip
        assert key in r, key
    assert r["command"].endswith("-m pipeline " + " ".join(argv))
    assert r["versions"]["numpy"] and r["hardware"]["cpus"] >= 1
    # sequential order, 120 samples / 8 = 15 steps per epoch: steps 15..39 repeat epoch 0's
    # batches, which an opt cache of 512 holds: 25 hits of 40 accesses
    assert r["cache"]["hits"] == 25 and r["cache"]["misses"] == 15
    assert r["shards_per_batch"] == 1.0  # 40-sample shards, batches of 8 never straddle
    assert r["batches"] == 40 and r["tokens_per_s"] == pytest.approx(16 * r["samples_per_s"])
    assert "samples/s" in stdout and "cache hit rate" in stdout and "62.5%" in stdout


def test_quiet_silences_progress(shards, tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "stderr", TTY())
    argv = ["bench", "--shards", str(shards), "--steps", "5", "--batch-size", "4", "-q",
            "--out-dir", str(tmp_path / "o")]  # fmt: skip
    assert main(argv) == 0
    assert sys.stderr.getvalue() == ""


def test_global_order_touches_more_shards(shards):
    ds = ShardedTokenDataset(shards)
    cfg = BenchConfig(str(shards), order="global", batch_size=8, steps=30)
    plan = plan_steps(ds, cfg)
    assert len(plan) == 30 and [e for e, _, _ in plan].count(1) == 15  # epochs as needed
    glob = run_bench(cfg, progress=False)
    seq = run_bench(BenchConfig(str(shards), order="sequential", batch_size=8, steps=30),
                    progress=False)  # fmt: skip
    assert seq["shards_per_batch"] == 1.0 and glob["shards_per_batch"] > 1.5


def test_augment_preset_and_workers(shards, tmp_path):
    pytest.importorskip("torch")  # workers=2: a torch DataLoader
    r = run_bench(
        BenchConfig(
            str(shards), preset="augment", order="sequential", batch_size=8, steps=20, workers=2
        ),  # fmt: skip
        progress=False,
    )
    assert r["augmented"] and r["batches"] == 20 and r["cache"]["policy"] == "opt"
    assert r["cache"]["hits"] == 5  # steps 15..19 repeat steps 0..4, through the shared cache
    evals = write_shards(tmp_path / "shard" / "eval", [24], seq_len=16)
    e = run_bench(BenchConfig(str(evals), preset="augment", batch_size=8, steps=3), progress=False)
    assert e["split"] == "eval" and not e["augmented"]  # eval loaders are never augmented


def test_bad_shards_is_one_line(tmp_path, capsys):
    assert main(["bench", "--shards", str(tmp_path / "nope"), "-q"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "not a folder" in err and "\n" not in err


def test_step_sweeps_feed_the_cache(shards, tmp_path, capsys):
    """--steps-per-sweep 5: steps 0..4 in a new order each sweep; 3 sweeps of 5 = 15 accesses,
    the first sweep misses, the other two hit (opt holds all 5 batches)."""
    argv = ["bench", "--shards", str(shards), "--preset", "cache", "--steps-per-sweep", "5",
            "--steps", "15", "--batch-size", "8", "-q", "--out-dir", str(tmp_path)]  # fmt: skip
    assert main(argv) == 0
    assert "steps, 5 per sweep" in capsys.readouterr().out
    r = json.loads(next(tmp_path.glob("bench_*.json")).read_text())
    assert (r["cache"]["hits"], r["cache"]["misses"]) == (10, 5)


def test_cache_overrides_and_opt_beats_lru(shards):
    """Sweeps of 10 steps (a new order each), 4 slots, 40 accesses: the overrides reach the
    cache, and opt (Belady on the planned trace) hits at least as often as lru and fifo."""
    hits = {}
    for policy in ("lru", "fifo", "opt"):
        cfg = BenchConfig(str(shards), batch_size=8, steps=40, steps_per_sweep=10,
                          cache_policy=policy, cache_batches=4)  # fmt: skip
        r = run_bench(cfg, progress=False)
        assert r["cache"]["policy"] == policy and r["cache"]["max_batches"] == 4
        hits[policy] = r["cache"]["hits"]
    assert hits["opt"] >= max(hits["lru"], hits["fifo"]) and hits["opt"] > 0
    bad = BenchConfig(str(shards), steps=2, cache_policy="lru", cache_batches=0)
    with pytest.raises(ValueError, match="max_batches must be > 0"):
        run_bench(bad, progress=False)


@pytest.mark.parametrize("steps_per_sweep", [0, 3])
def test_an_empty_shard_folder_is_one_line_not_a_hang(tmp_path, capsys, steps_per_sweep):
    """The issue's case: shard/eval of a run with shard.eval_fraction=0 (no shard, 0 samples);
    plan_steps looped forever at 100% CPU. SIGALRM fails the test instead of hanging it."""
    import signal

    empty = write_shards(tmp_path / "shard" / "eval", [], seq_len=16)

    def hung(signum, frame):
        raise AssertionError("bench hung on an empty shard folder")

    old = signal.signal(signal.SIGALRM, hung)
    signal.alarm(60)
    try:
        args = ["bench", "--shards", str(empty), "--steps-per-sweep", str(steps_per_sweep)]
        capsys.readouterr()
        assert main([*args, "--steps", "5", "-q"]) == 1
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    err = capsys.readouterr().err.strip()
    assert err == f"error: {empty}: holds no samples (num_samples 0): nothing to bench"
