"""Part-level resume: a crashed or killed stage, re-run, redoes only unfinished parts and ends
with the bytes of an uninterrupted run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

import pipeline.stages as stages_mod
import pipeline.stages.clean as clean_stage
from fake_stages import LOWER, computed_parts
from helpers import make_recipe
from pipeline.report import load_report
from pipeline.run.resume import RESUME_DIR, PartLedger, decode, encode
from pipeline.run.runner import run_recipe

DOWNLOAD = {"source": "toy", "max_docs": 400, "docs_per_part": 50}  # 8 parts


def shas(run_dir: Path) -> dict[str, list[str]]:
    m = json.loads((run_dir / "manifest.json").read_text())["stages"]
    return {n: [o["sha256"] for o in e["outputs"]] for n, e in m.items()}


def markers(run_dir: Path, stage: str = "clean") -> set[int]:
    folder = run_dir / f".tmp-{stage}" / RESUME_DIR
    return {int(p.stem.rsplit("-", 1)[1]) for p in folder.glob("*-*-*.json")}


def test_codec_round_trips_task_results():
    value = {
        "outputs": ["part-00001.parquet"],
        "arr": np.arange(6, dtype=np.int64).reshape(2, 3),
        "f32": np.float32(0.25),
        "scripts": Counter({"latin": 3}),
        "examples": {3: ("id-3", "text"), 5: ("id-5", "more")},
        "__odd": [1.5, None, True],
    }
    back = decode(json.loads(json.dumps(encode(value))))
    assert back.keys() == value.keys()
    assert back["arr"].dtype == np.int64 and (back["arr"] == value["arr"]).all()
    assert back["f32"].dtype == np.float32 and back["f32"] == value["f32"]
    assert back["scripts"] == value["scripts"] and isinstance(back["scripts"], Counter)
    assert back["examples"] == value["examples"] and back["__odd"] == value["__odd"]


def test_other_fingerprint_starts_empty_and_same_keeps_only_recorded(tmp_path):
    stage = tmp_path / ".tmp-x"
    ledger = PartLedger.open(stage, "fp1")
    (stage / "part-00000.parquet").write_text("done")
    (stage / ".part-00001.parquet.123-abc.tmp").write_text("half")
    fn = ledger.wrap(lambda item: {"outputs": ["part-00000.parquet"], "n": item})
    assert fn((ledger.keys("w", 1)[0], 7))["n"] == 7
    again = PartLedger.open(stage, "fp1")
    assert len(again) == 1 and again.lookup(again.keys("w", 1)[0]) == {
        "outputs": ["part-00000.parquet"],
        "n": 7,
    }
    assert not (stage / ".part-00001.parquet.123-abc.tmp").exists()  # partial file gone
    (stage / "part-00000.parquet").write_text("tampered")
    assert len(PartLedger.open(stage, "fp1")) == 0  # sha256 no longer matches: redo
    assert len(PartLedger.open(stage, "fp2")) == 0 and not (stage / "part-00000.parquet").exists()


def _lower_recipe(tmp_path, workers=2):
    return make_recipe(tmp_path / "run", {"download": DOWNLOAD, "clean": {}}, workers=workers)


@pytest.fixture
def fake_clean(monkeypatch):
    monkeypatch.setitem(stages_mod.STAGES, "clean", LOWER)


def test_crash_mid_stage_redoes_only_unfinished_parts(tmp_path, fake_clean, caplog):
    run_dir = tmp_path / "run"
    (tmp_path / "crash_at").write_text("5")
    with pytest.raises(RuntimeError, match="simulated crash at part 5"):
        run_recipe(_lower_recipe(tmp_path), progress=False)
    finished = markers(run_dir)
    assert {0, 1, 2, 3, 4} <= finished and 5 not in finished
    (tmp_path / "crash_at").unlink()
    (tmp_path / "lower_parts.txt").unlink()
    with caplog.at_level("INFO", logger="pipeline"):
        run_recipe(_lower_recipe(tmp_path), progress=False)
    assert set(computed_parts(run_dir)) == set(range(8)) - finished  # finished ones not redone
    assert not (run_dir / ".tmp-clean").exists()
    assert f"[clean] {len(finished)} tasks resumed from a crashed run" in caplog.text
    fresh = tmp_path / "fresh"
    run_recipe(make_recipe(fresh, {"download": DOWNLOAD, "clean": {}}), progress=False)
    assert shas(run_dir) == shas(fresh)


def test_markers_of_older_versions_without_stamps_still_resume(tmp_path, fake_clean):
    """A marker's outputs were [bytes, sha256] before they carried a stamp: such a crashed run
    resumes, its files checked by sha256."""
    run_dir = tmp_path / "run"
    (tmp_path / "crash_at").write_text("5")
    with pytest.raises(RuntimeError, match="simulated crash at part 5"):
        run_recipe(_lower_recipe(tmp_path), progress=False)
    finished = markers(run_dir)
    for path in (run_dir / ".tmp-clean" / RESUME_DIR).glob("*-*-*.json"):
        marker = json.loads(path.read_text())
        assert all(len(rec) == 3 and rec[2] for rec in marker["outputs"].values())
        marker["outputs"] = {rel: rec[:2] for rel, rec in marker["outputs"].items()}
        path.write_text(json.dumps(marker))
    (tmp_path / "crash_at").unlink()
    (tmp_path / "lower_parts.txt").unlink()
    run_recipe(_lower_recipe(tmp_path), progress=False)
    assert set(computed_parts(run_dir)) == set(range(8)) - finished
    fresh = tmp_path / "fresh"
    run_recipe(make_recipe(fresh, {"download": DOWNLOAD, "clean": {}}), progress=False)
    assert shas(run_dir) == shas(fresh)


_KILLED_RUN = """
import sys
sys.path[:0] = {paths!r}
import pipeline.stages as stages_mod
from fake_stages import LOWER
from helpers import make_recipe
from pipeline.run.runner import run_recipe
stages_mod.STAGES["clean"] = LOWER
download = {download!r}
run_recipe(make_recipe({run!r}, {{"download": download, "clean": {{}}}}, workers=2), progress=False)
"""


def test_killed_run_resumes_with_same_bytes(tmp_path, fake_clean):
    run_dir = tmp_path / "run"
    run_recipe(make_recipe(run_dir, {"download": DOWNLOAD}), progress=False)
    (tmp_path / "slow").write_text("0.4")
    here = Path(__file__).parent
    code = _KILLED_RUN.format(
        paths=[str(here), str(here.parent / "src")], download=DOWNLOAD, run=str(run_dir)
    )
    proc = subprocess.Popen([sys.executable, "-c", code], start_new_session=True)
    deadline = time.monotonic() + 60
    while len(markers(run_dir)) < 3 and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    assert proc.poll() is None, "the run ended before it could be killed"
    os.killpg(proc.pid, signal.SIGKILL)  # the driver and its pool, mid-stage
    proc.wait()
    finished = markers(run_dir)
    assert 3 <= len(finished) < 8, "the kill should land mid-stage"
    n_before = len(computed_parts(run_dir))
    (tmp_path / "slow").unlink()
    run_recipe(_lower_recipe(tmp_path), progress=False)
    redone = computed_parts(run_dir)[n_before:]
    assert sorted(redone) == sorted(set(range(8)) - finished)  # each unfinished part once
    fresh = tmp_path / "fresh"
    run_recipe(make_recipe(fresh, {"download": DOWNLOAD, "clean": {}}), progress=False)
    assert shas(run_dir) == shas(fresh)


def test_real_clean_stage_resumes_with_same_bytes_and_stats(tmp_path, monkeypatch, caplog):
    """The real clean stage's per-part results (numpy arrays, Counters) survive the record."""
    original = clean_stage.clean_part

    def crashing(item, **kw):
        if item.index == 3:
            raise RuntimeError("simulated crash")
        return original(item, **kw)

    stages = {"download": DOWNLOAD, "clean": {}}
    monkeypatch.setattr(clean_stage, "clean_part", crashing)
    with pytest.raises(RuntimeError):
        run_recipe(make_recipe(tmp_path / "run", stages), progress=False)
    monkeypatch.setattr(clean_stage, "clean_part", original)
    with caplog.at_level("INFO", logger="pipeline"):
        run_recipe(make_recipe(tmp_path / "run", stages), progress=False)
    assert "[clean] 3 tasks resumed from a crashed run" in caplog.text
    run_recipe(make_recipe(tmp_path / "fresh", stages), progress=False)
    assert shas(tmp_path / "run") == shas(tmp_path / "fresh")
    got, want = (load_report(tmp_path / d)["stages"][1]["stats"] for d in ("run", "fresh"))
    for s in (got, want):
        s.pop("docs_per_s"), s.pop("mb_per_s")
    assert got == want


@pytest.mark.parametrize("cap", [None, 10])  # None: the exact path; 10: the bounded path
def test_shard_writes_are_recorded_and_resume(tmp_path, monkeypatch, caplog, cap):
    """A crash while writing train shards, re-run: the written shards are kept (not rewritten)
    and the stage ends with an uninterrupted run's bytes and statistics."""
    import pipeline.stages.shard as shard_stage
    import pipeline.stages.shard.bounded as bounded

    stages = {
        "download": {"source": "toy", "max_docs": 200, "docs_per_part": 50},
        "tokenize": {"vocab_size": 400},
        "pack": {"seq_len": 128, "sequences_per_part": 64},
        "shard": {"shard_size": 8, "eval_fraction": 0.05},
    }
    if cap:
        stages["shard"]["exact_max_sequences"] = cap
    mod, name = (bounded, "write_train_shard") if cap else (shard_stage, "write_shard")
    original = getattr(mod, name)
    calls: Counter[str] = Counter()

    def crashing(job, **kw):
        if job[0] == 3 and "train" in kw["out_dir"]:
            raise RuntimeError("simulated crash")
        return original(job, **kw)

    monkeypatch.setattr(mod, name, crashing)
    with pytest.raises(RuntimeError):
        run_recipe(make_recipe(tmp_path / "run", stages), progress=False)
    calls.clear()

    def counting(job, **kw):
        calls[Path(kw["out_dir"]).name] += 1
        return original(job, **kw)

    monkeypatch.setattr(mod, name, counting)
    with caplog.at_level("INFO", logger="pipeline"):
        run_recipe(make_recipe(tmp_path / "run", stages), progress=False)
    assert "[shard] 3 tasks resumed from a crashed run" in caplog.text
    monkeypatch.setattr(mod, name, original)
    run_recipe(make_recipe(tmp_path / "fresh", stages), progress=False)
    assert shas(tmp_path / "run") == shas(tmp_path / "fresh")
    got, want = (load_report(tmp_path / d)["stages"][-1]["stats"] for d in ("run", "fresh"))
    for s in (got, want):
        s.pop("docs_per_s", None), s.pop("mb_per_s", None), s.pop("seconds", None)
    assert got == want
    assert got["shuffle_method"] == ("feistel" if cap else "exact")
    assert calls["train"] == got["num_shards_train"] - 3  # the 3 written ones were kept
