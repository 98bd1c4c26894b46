"""pretrain: exact resume, atomic checkpoints, evaluation, and one line per bad input."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from pipeline.errors import DataError, PipelineError  # noqa: E402
from pipeline.train import trainer as trainer_mod  # noqa: E402
from pipeline.train.checkpoint import load_checkpoint  # noqa: E402
from pipeline.train.trainer import Trainer, pretrain  # noqa: E402

SRC = Path(__file__).resolve().parents[2] / "src"


def test_resumed_losses_equal_uninterrupted_bit_for_bit(tiny_cfg, tmp_path):
    """Stop at step 3 (a checkpoint), resume in a new Trainer: every per-step loss equals the
    uninterrupted run's exactly, and so does the final model."""
    cfg = dataclasses.replace(tiny_cfg, dropout=0.1)  # dropout: the RNG state must resume too
    full = pretrain(cfg, out_dir=tmp_path / "full", progress=False)
    head = pretrain(cfg, out_dir=tmp_path / "split", progress=False, stop_at=3)
    assert head["steps"] == 3 and head["losses"] == full["losses"][:3]
    tail = pretrain(cfg, out_dir=tmp_path / "split", progress=False, resume=True)
    assert tail["losses"] == full["losses"]  # floats compared exactly
    a = load_checkpoint(tmp_path / "full" / "checkpoint.pt")["model"]
    b = load_checkpoint(tmp_path / "split" / "checkpoint.pt")["model"]
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert full["losses"][-1] < full["losses"][0]  # it learns


def test_report_has_curve_evals_and_bits_per_byte(tiny_cfg, tmp_path):
    text = tmp_path / "held.jsonl"
    text.write_text(json.dumps({"text": "The cat sat on the mat. Ünïcode too."}) + "\n")
    txt = tmp_path / "plain.txt"
    txt.write_text("A plain text file is one document.\n")
    cfg = dataclasses.replace(tiny_cfg, eval_texts=[str(text), str(txt)])
    rep = pretrain(cfg, out_dir=tmp_path / "o", progress=False)
    on_disk = json.loads((tmp_path / "o" / "report.json").read_text())
    assert on_disk["losses"] == rep["losses"] and len(rep["losses"]) == 8
    assert [e["step"] for e in rep["evals"]] == [4, 8]
    final = rep["final"]
    assert final["shard_eval"]["perplexity"] == pytest.approx(
        float(torch.tensor(final["shard_eval"]["loss"]).exp()), rel=1e-6
    )
    ev = final["texts"][str(text)]
    assert ev["bytes"] == len("The cat sat on the mat. Ünïcode too.".encode())
    assert ev["bpb"] == pytest.approx(ev["nats"] / 0.6931471805599453 / ev["bytes"])
    assert rep["tokens"] == 8 * 4 * 32 and rep["tokens_per_s"] > 0


def test_bits_per_byte_scores_every_token_of_the_text(tiny_run):
    """text_windows covers each id once, with EOS as the first context."""
    from pipeline.train.evaluate import text_windows

    ids = list(range(10, 80))
    windows = text_windows(ids, 1, 32)
    assert [t for _, y in windows for t in y] == ids
    assert windows[0][0][0] == 1 and all(len(x) == len(y) <= 32 for x, y in windows)


# a subprocess importing torch: ~15 s
def test_kill_9_leaves_the_last_good_checkpoint_and_resume_finishes_exactly(tiny_cfg, tmp_path):
    """A run checkpointing every step is killed with SIGKILL mid-run; the checkpoint left loads,
    and resuming from it reproduces the uninterrupted losses."""
    cfg = dataclasses.replace(tiny_cfg, max_steps=400, save_every=1, eval_every=0)
    recipe = tmp_path / "r.yaml"
    keys = ("run_dir", "n_layer", "n_head", "d_model", "batch_size", "max_steps", "warmup_steps")
    block = {k: getattr(cfg, k) for k in keys} | {"save_every": 1, "eval_every": 0}
    block |= {"lr": cfg.lr, "min_lr": cfg.min_lr, "eval_tokens": 256, "device": "cpu"}
    recipe.write_text(json.dumps({"pretrain": block}))  # JSON is YAML
    out = tmp_path / "k"
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    cmd = [sys.executable, "-m", "pipeline", "pretrain", "--config", str(recipe)]
    proc = subprocess.Popen([*cmd, "--out-dir", str(out), "-q"], env=env)
    deadline = time.time() + 120
    while not (out / "checkpoint.pt").exists() and time.time() < deadline:
        time.sleep(0.05)
    time.sleep(0.3)  # somewhere in the middle of steps and writes
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    saved = load_checkpoint(out / "checkpoint.pt")
    assert 1 <= saved["step"] < 400
    full = pretrain(cfg, out_dir=tmp_path / "full", progress=False, stop_at=saved["step"] + 5)
    resumed = pretrain(cfg, out_dir=out, progress=False, resume=True, stop_at=saved["step"] + 5)
    assert resumed["losses"] == full["losses"]


def test_nan_loss_stops_names_the_step_and_keeps_the_last_checkpoint(
    tiny_cfg, tmp_path, monkeypatch
):
    real = trainer_mod.loss_sum
    calls = {"n": 0}

    def poisoned(model, ids, seg):
        calls["n"] += 1
        nats, count = real(model, ids, seg)
        return (nats * float("nan") if calls["n"] == 5 else nats), count

    monkeypatch.setattr(trainer_mod, "loss_sum", poisoned)
    out = tmp_path / "n"
    with pytest.raises(PipelineError, match=r"loss is nan at step 5: stopped.*step 3\) is kept"):
        pretrain(tiny_cfg, out_dir=out, progress=False)
    assert load_checkpoint(out / "checkpoint.pt")["step"] == 3
    assert not (out / "report.json").exists()


def test_out_of_memory_is_a_hint(tiny_cfg, tmp_path, monkeypatch):
    def oom(model, ids, seg):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")

    monkeypatch.setattr(trainer_mod, "loss_sum", oom)
    with pytest.raises(PipelineError, match="lower pretrain.batch_size and raise .*grad_accum"):
        pretrain(tiny_cfg, out_dir=tmp_path / "m", progress=False)


def test_checkpoint_of_another_shape_or_vocab_is_refused(tiny_cfg, tmp_path):
    out = tmp_path / "c"
    pretrain(tiny_cfg, out_dir=out, progress=False, stop_at=3)
    wider = dataclasses.replace(tiny_cfg, d_model=32)
    with pytest.raises(DataError, match="d_model 16 -> 32"):
        pretrain(wider, out_dir=out, progress=False, resume=True)
    blob = torch.load(out / "checkpoint.pt", weights_only=True)
    blob["shape"]["vocab_size"] = 999
    torch.save(blob, out / "checkpoint.pt")
    with pytest.raises(DataError, match="vocab_size 999 -> "):
        pretrain(tiny_cfg, out_dir=out, progress=False, resume=True)
    with pytest.raises(PipelineError, match="exists: pass --resume"):
        pretrain(tiny_cfg, out_dir=out, progress=False)
    assert torch.load(out / "checkpoint.pt", weights_only=True)["step"] == 3  # nothing lost


def test_bad_inputs_are_one_line(tiny_cfg, tmp_path):
    with pytest.raises(DataError, match="has no shard/train/ with metadata.json"):
        Trainer(tiny_cfg, run_dir=tmp_path, out_dir=tmp_path / "x")
    missing = dataclasses.replace(tiny_cfg, eval_texts=[str(tmp_path / "nope.jsonl")])
    with pytest.raises(DataError, match="nope.jsonl: eval text not found"):
        Trainer(missing, out_dir=tmp_path / "x")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "ok"}\n{"txt": 1}\n')
    with pytest.raises(DataError, match=r"bad.jsonl:2: field 'text' is missing"):
        Trainer(dataclasses.replace(tiny_cfg, eval_texts=[str(bad)]), out_dir=tmp_path / "x")
    with pytest.raises(DataError, match="no checkpoint to resume from"):
        Trainer(tiny_cfg, out_dir=tmp_path / "y", resume=True)


def test_an_eval_text_with_a_lone_surrogate_is_one_line(tiny_cfg, tmp_path):
    """`{"text": "\\ud800"}` parses to a str with no UTF-8 bytes: it was a UnicodeEncodeError
    traceback at the first evaluation (pretrain) or after the training (ablate)."""
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "fine"}\n{"text": "ab\\ud800"}\n')
    cfg = dataclasses.replace(tiny_cfg, eval_texts=[str(bad)])
    with pytest.raises(DataError, match=r"bad.jsonl:2: field 'text' holds a lone surrogate at ch"):
        pretrain(cfg, out_dir=tmp_path / "x", progress=False)
    assert not (tmp_path / "x" / "checkpoint.pt").exists()  # refused before any training


@pytest.mark.parametrize(
    "vocab, match",
    [
        ("abc", r"field 'vocab_size' must be an integer >= 1, got 'abc'"),
        (0, r"field 'vocab_size' must be an integer >= 1, got 0"),
        (3, r"vocab_size 3 does not cover eos_id \d+: shards of another tokenizer\?"),
    ],
)
def test_bad_vocab_size_in_metadata_is_one_line(tiny_cfg, tiny_run, tmp_path, vocab, match):
    """A hand-edited metadata.json vocab_size was int()'s ValueError, or torch's embedding
    error (index_select / index out of range) at the first step."""
    import shutil

    run = tmp_path / "run"
    shutil.copytree(tiny_run / "shard", run / "shard")
    path = run / "shard" / "train" / "metadata.json"
    meta = json.loads(path.read_text())
    meta["vocab_size"] = vocab
    path.write_text(json.dumps(meta))
    with pytest.raises(DataError, match=f"^{path}: {match}"):
        pretrain(tiny_cfg, run, tmp_path / "out", progress=False)
