"""The tokenize stage end to end: outputs per part, EOS, dtype, determinism, errors."""

from __future__ import annotations

import json

import numpy as np
import pyarrow.parquet as pq
import pytest

from helpers import make_recipe, run_stages
from pipeline.errors import DataError, RecipeError
from pipeline.stages.tokenize import part_train_sizes, quota_from_totals, train_quota
from pipeline.tokenizer import load

TOK = {"vocab_size": 600, "heldout_fraction": 0.1}


def _stage_stats(run_dir, name="tokenize"):
    report = json.loads((run_dir / "pipeline_report.json").read_text())
    return next(s for s in report["stages"] if s["stage"] == name)["stats"]


def _tokenize_jsonl(tmp_path, rows: list[dict], **cfg):
    """download rows from a JSONL file, then tokenize (no held-out): the run folder."""
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    run = tmp_path / "run"
    tokenize = {"heldout_fraction": 0.0, **cfg}
    run_stages(run, {"download": {"source": "jsonl", "path": str(src)}, "tokenize": tokenize})
    return run


def _tokenize(toy_run, **cfg):
    dl = {"source": "toy", "max_docs": 400, "docs_per_part": 100}
    run_stages(toy_run, {"download": dl, "tokenize": {**TOK, **cfg}})
    return toy_run / "tokenize"


def test_outputs_match_the_format(toy_run):
    out = _tokenize(toy_run)
    meta = json.loads((out / "meta.json").read_text())
    assert meta["vocab_size"] == 600 and meta["dtype"] == "uint16"
    assert set(meta) == {
        "vocab_size",
        "eos_id",
        "pad_id",
        "dtype",
        "tokenizer_sha256",
        "special_tokens",
    }
    tok = load(out / "tokenizer.json")
    assert tok.eos_id == meta["eos_id"] and tok.specials["<|pad|>"] == meta["pad_id"]
    for i in range(4):
        tokens = np.load(out / f"part-{i:05d}.tokens.npy", allow_pickle=False)
        docs = pq.read_table(out / f"part-{i:05d}.docs.parquet")
        src = pq.read_table(toy_run / "download" / f"part-{i:05d}.parquet")
        assert tokens.dtype == np.uint16 and tokens.ndim == 1
        assert docs.column_names == ["id", "source", "label", "num_tokens"]
        assert docs.column("id").to_pylist() == src.column("id").to_pylist()
        ends = np.cumsum(docs.column("num_tokens").to_numpy())
        assert ends[-1] == len(tokens)
        assert (tokens[ends - 1] == meta["eos_id"]).all()
        assert (tokens == meta["eos_id"]).sum() == docs.num_rows
        starts = np.concatenate([[0], ends[:-1]])
        texts = src.column("text").to_pylist()
        for s, e, text in list(zip(starts, ends, texts, strict=True))[:20]:
            assert tok.decode(tokens[s : e - 1].tolist()) == text


def test_report_fields(toy_run):
    _tokenize(toy_run)
    st = _stage_stats(toy_run)
    assert st["docs_in"] == st["docs_out"] == 400 and st["dropped_empty"] == 0
    assert st["vocab_size"] == 600 and st["num_merges"] == 600 - 256 - 7
    assert not st["stopped_early"] and len(st["first_merges"]) == 20
    assert 0 < st["heldout_docs"] < 400 and st["train_docs"] == 400 - st["heldout_docs"]
    assert st["bytes_per_token_train"] > 2 and st["bytes_per_token_heldout"] > 2
    assert st["tokens_out"] > st["bytes_in"] / 10


def test_workers_give_identical_bytes(tmp_path):
    stages = {"download": {"source": "toy", "max_docs": 300, "docs_per_part": 100}, "tokenize": TOK}
    run_stages(tmp_path / "a", stages, workers=1)
    run_stages(tmp_path / "b", stages, workers=2)
    ma = json.loads((tmp_path / "a" / "manifest.json").read_text())["stages"]["tokenize"]
    mb = json.loads((tmp_path / "b" / "manifest.json").read_text())["stages"]["tokenize"]
    assert [o["sha256"] for o in ma["outputs"]] == [o["sha256"] for o in mb["outputs"]]
    assert len(ma["outputs"]) == 5 + 2 * 3  # tokenizer.json, hf_tokenizer/ (3), meta.json


def test_load_given_tokenizer(toy_run, tmp_path):
    out = _tokenize(toy_run)
    other = tmp_path / "other"
    dl = {"source": "toy", "max_docs": 400, "docs_per_part": 100}
    run_stages(other, {"download": dl, "tokenize": {"tokenizer_path": str(out / "tokenizer.json")}})
    a = np.load(out / "part-00002.tokens.npy")
    b = np.load(other / "tokenize" / "part-00002.tokens.npy")
    assert np.array_equal(a, b)
    assert "num_merges" not in _stage_stats(other)


def test_empty_docs_dropped_and_huge_word_chunked(tmp_path):
    """Two empty documents go to rejected/; a 300 kB word with no space trains and encodes."""
    big = "abcdefghij" * 30_000
    rows = [
        {"id": "e1", "text": ""},
        {"id": "a", "text": "hello world " * 50},
        {"id": "e2", "text": ""},
        {"id": "big", "text": big},
        {"id": "z", "text": "bye"},
    ]
    run = _tokenize_jsonl(tmp_path, rows, vocab_size=400)
    st = _stage_stats(run)
    assert st["docs_in"] == 5 and st["docs_out"] == 3 and st["dropped_empty"] == 2
    rej = pq.read_table(run / "tokenize" / "rejected" / "part-00000.parquet")
    assert rej.column("id").to_pylist() == ["e1", "e2"]
    assert rej.column("reasons").to_pylist() == [["empty"], ["empty"]]
    docs = pq.read_table(run / "tokenize" / "part-00000.docs.parquet")
    assert docs.column("id").to_pylist() == ["a", "big", "z"]
    tok = load(run / "tokenize" / "tokenizer.json")
    tokens = np.load(run / "tokenize" / "part-00000.tokens.npy").tolist()
    n = docs.column("num_tokens").to_pylist()
    assert tok.decode(tokens[n[0] : n[0] + n[1] - 1]) == big


def test_tiny_corpus_stops_early_and_says_so(tmp_path):
    run = _tokenize_jsonl(tmp_path, [{"id": "1", "text": "ab ab ab"}], vocab_size=1000)
    st = _stage_stats(run)
    assert st["stopped_early"] and st["stop_reason"] in ("min_frequency", "no_pairs")
    assert st["vocab_size"] < 1000
    meta = json.loads((run / "tokenize" / "meta.json").read_text())
    assert meta["vocab_size"] == st["vocab_size"]


def test_train_quota_caps_in_part_order():
    sizes = [np.array([10, 10, 10]), np.array([10, 10])]
    assert train_quota(sizes, None, None) == [3, 2]
    assert train_quota(sizes, 4, None) == [3, 1]
    assert train_quota(sizes, None, 25) == [2, 0]


def test_quota_from_totals_equals_the_per_document_quota():
    rng = np.random.default_rng(0)
    for _ in range(300):
        sizes = [rng.integers(1, 20, rng.integers(0, 6)) for _ in range(rng.integers(0, 5))]
        max_docs = None if rng.random() < 0.3 else int(rng.integers(0, 25))
        max_bytes = None if rng.random() < 0.3 else int(rng.integers(0, 250))
        asked = []

        def within(i, budget, sizes=sizes, asked=asked):
            asked.append(i)
            return int(np.searchsorted(np.cumsum(sizes[i]), budget, side="right"))

        totals = [(len(s), int(s.sum())) for s in sizes]
        got = quota_from_totals(totals, max_docs, max_bytes, within)
        assert got == train_quota(sizes, max_docs, max_bytes)
        assert len(asked) <= 1  # at most one part is read again


def test_byte_cap_inside_a_part_trains_on_the_same_documents(toy_run):
    dl = {"source": "toy", "max_docs": 400, "docs_per_part": 100}
    run_stages(toy_run, {"download": dl})
    parts = sorted((toy_run / "download").glob("part-*.parquet"))
    sizes = [part_train_sizes(p, 0, 0.0) for p in parts]  # no held-out: seed-free
    cap = int(sizes[0].sum() + sizes[1][:7].sum() + 1)  # falls inside part 1
    expected = train_quota(sizes, None, cap)
    assert expected[:3] == [len(sizes[0]), 7, 0]
    tok = {**TOK, "heldout_fraction": 0.0, "max_train_bytes": cap}
    run_stages(toy_run, {"download": dl, "tokenize": tok})
    assert _stage_stats(toy_run)["train_docs"] == sum(expected)


def test_vocab_size_below_bytes_plus_specials(tmp_path):
    with pytest.raises(RecipeError, match=r"tokenize.vocab_size: must be at least 256 bytes"):
        make_recipe(tmp_path, {"download": {"source": "toy"}, "tokenize": {"vocab_size": 260}})


def test_specials_must_hold_eos_and_pad(tmp_path):
    with pytest.raises(RecipeError, match=r"special_tokens: must contain '<\|endoftext\|>'"):
        make_recipe(
            tmp_path, {"download": {"source": "toy"}, "tokenize": {"special_tokens": ["<|pad|>"]}}
        )


def test_bad_tokenizer_file_stops_the_run(toy_run, tmp_path):
    bad = tmp_path / "tokenizer.json"
    bad.write_text("{}")
    with pytest.raises(DataError, match="model.type must be 'BPE'"):
        _tokenize(toy_run, tokenizer_path=str(bad))


def test_missing_tokenizer_file_is_a_recipe_error(tmp_path):
    with pytest.raises(RecipeError, match=r"tokenize.tokenizer_path: no file"):
        make_recipe(
            tmp_path,
            {"download": {"source": "toy"}, "tokenize": {"tokenizer_path": str(tmp_path / "x")}},
        )
