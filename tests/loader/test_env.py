"""Data paths from the environment: TRAIN_DATA_PATH / EVAL_DATA_PATH for TokenLoader.from_env()
and `pipeline bench --shards env`; a variable set but empty, or missing, is one clear error."""

from __future__ import annotations

import json

import pytest

from pipeline.loader.env import data_path

from .conftest import ids_of, write_shards


@pytest.fixture
def run_dir(tmp_path):
    write_shards(tmp_path / "run" / "shard" / "train", [10, 6])
    write_shards(tmp_path / "run" / "shard" / "eval", [5])
    return tmp_path / "run"


def test_data_path_accepts_a_shard_folder_a_run_or_shard_root(run_dir, monkeypatch):
    for value in (run_dir / "shard" / "train", run_dir, run_dir / "shard"):
        monkeypatch.setenv("TRAIN_DATA_PATH", str(value))
        assert data_path("train") == str(run_dir / "shard" / "train")
    monkeypatch.setenv("EVAL_DATA_PATH", str(run_dir))
    assert data_path("eval") == str(run_dir / "shard" / "eval")
    monkeypatch.setenv("TRAIN_DATA_PATH", "s3://bucket/run/shard/train")
    assert data_path("train") == "s3://bucket/run/shard/train"  # URLs pass through


def test_missing_or_empty_variable_is_one_clear_error(monkeypatch):
    monkeypatch.delenv("TRAIN_DATA_PATH", raising=False)
    with pytest.raises(ValueError, match="TRAIN_DATA_PATH is not set"):
        data_path("train")
    monkeypatch.setenv("EVAL_DATA_PATH", "  ")
    with pytest.raises(ValueError, match="EVAL_DATA_PATH is set but empty"):
        data_path("eval")
    with pytest.raises(ValueError, match="split must be one of"):
        data_path("test")


def test_token_loader_from_env_reads_train_shuffled_and_eval_in_order(run_dir, monkeypatch):
    pytest.importorskip("torch")
    from pipeline.loader import TokenLoader

    monkeypatch.setenv("TRAIN_DATA_PATH", str(run_dir))
    monkeypatch.setenv("EVAL_DATA_PATH", str(run_dir / "shard" / "eval"))
    train = TokenLoader.from_env(4, seed=1, num_workers=0, as_torch=False)
    seen = [i for b in train for i in ids_of(b)]
    assert sorted(seen) == list(range(16)) and seen != list(range(16))  # global shuffle
    ev = TokenLoader.from_env(2, split="eval", num_workers=0, as_torch=False)
    assert [i for b in ev for i in ids_of(b)] == list(range(5))  # eval: in order
    assert ev.sampler.order == "sequential"


def test_bench_shards_env(run_dir, monkeypatch, tmp_path, capsys):
    from pipeline.cli import main

    monkeypatch.setenv("TRAIN_DATA_PATH", str(run_dir))
    out = tmp_path / "bench"
    args = ["bench", "--shards", "env", "--steps", "3", "--batch-size", "4", "--out-dir", str(out)]
    assert main([*args, "-q"]) == 0
    result = json.loads(next(out.glob("*.json")).read_text())
    assert result["config"]["shards"] == str(run_dir / "shard" / "train")
    monkeypatch.setenv("TRAIN_DATA_PATH", "")
    assert main([*args, "-q"]) == 1
    assert "TRAIN_DATA_PATH is set but empty" in capsys.readouterr().err
