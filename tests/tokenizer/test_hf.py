"""The run's tokenizer in transformers: tokenizer.json through PreTrainedTokenizerFast, and the
tokenize stage's hf_tokenizer/ folder through AutoTokenizer, offline, with ids equal to ours."""

from __future__ import annotations

import json
import sys
from unittest.mock import patch

import numpy as np
import pyarrow.parquet as pq
import pytest

from helpers import run_stages
from pipeline.errors import DataError
from pipeline.tokenizer import PII_PLACEHOLDERS, dumps, encoder, hf, load
from tokenizer_cases import MIXED

transformers = pytest.importorskip("transformers")

# Real-ish text: prose, code, numbers, CRLF, runs of spaces and newlines, accents, CJK, emoji,
# several scripts, and the clean stage's placeholders inside sentences.
PROSE = (
    "The committee met on 12 March 2024 at 09:30; it adjourned at 11:45 after a short vote.\n\n"
    "    def area(r: float) -> float:\n        return 3.14159 * r ** 2  # not math.pi\n\n"
    "Write to <|email|> or see <|url|> (server <|ip|>, phone <|phone|>, key <|key|>).\r\n"
    "Café, naïve, coöperate — “quoted” and ‘single’… 東京は晴れ。 Привет, мир! 🙂👍🏽\n"
    "   leading spaces, trailing tabs\t\t\nnumbers 1,234,567.89 and 0xFF and 1e-9\n"
)
TEXTS = [
    PROSE,
    "It was a bright cold day in April, and the clocks were striking thirteen.",
    "Call me Ishmael. Some years ago - never mind how long precisely - having little money.",
    "x" * 300 + " " + "ab" * 100,
    "  \n\n\t ",
    "<|endoftext|> inside the text stays one token",
]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("tok")
    src = tmp / "in.jsonl"
    rows = [{"id": f"d{i}", "text": t} for i, t in enumerate(TEXTS * 20)]
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    stages = {
        "download": {"source": "jsonl", "path": str(src)},
        "tokenize": {"vocab_size": 400, "heldout_fraction": 0.0, "min_frequency": 1},
    }
    run_stages(tmp / "run", stages)
    return tmp / "run"


def _meta(run_dir):
    return json.loads((run_dir / "tokenize" / "meta.json").read_text())


def test_tokenizer_file_loads_with_the_specials_mapped(run_dir):
    path = run_dir / "tokenize" / "tokenizer.json"
    ours = load(path)
    fast = transformers.PreTrainedTokenizerFast(
        tokenizer_file=str(path), **hf.special_tokens_map(ours)
    )
    meta = _meta(run_dir)
    assert fast.eos_token_id == meta["eos_id"] and fast.pad_token_id == meta["pad_id"]
    assert len(fast) == meta["vocab_size"]  # nothing added: every special was already there
    extra = set(fast.all_special_tokens) - {fast.eos_token, fast.pad_token}
    assert extra == set(PII_PLACEHOLDERS)
    assert fast.convert_tokens_to_ids(list(PII_PLACEHOLDERS)) == [
        meta["special_tokens"][p] for p in PII_PLACEHOLDERS
    ]
    for text in TEXTS:
        assert fast(text)["input_ids"] == ours.encode(text), text


def test_hf_tokenizer_folder_loads_with_auto_tokenizer_offline(run_dir, hf_offline):
    folder = run_dir / "tokenize" / "hf_tokenizer"
    assert sorted(p.name for p in folder.iterdir()) == sorted(hf.PRETRAINED_FILES)
    assert (folder / "tokenizer.json").read_bytes() == (
        run_dir / "tokenize" / "tokenizer.json"
    ).read_bytes()
    auto = transformers.AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
    meta = _meta(run_dir)
    assert (auto.eos_token_id, auto.pad_token_id) == (meta["eos_id"], meta["pad_id"])
    assert auto.bos_token is None and auto.unk_token is None
    ours = load(folder / "tokenizer.json")
    for text in TEXTS:
        ids = auto(text)["input_ids"]
        assert ids == ours.encode(text), text
        assert auto.decode(ids) == text  # no space cleanup: decode(encode(x)) == x
    batch = auto(TEXTS[:3], padding=True)
    width = max(len(ours.encode(t)) for t in TEXTS[:3])
    assert all(len(row) == width for row in batch["input_ids"])
    assert batch["input_ids"][1][-1] == meta["pad_id"] and batch["attention_mask"][1][-1] == 0


def test_the_stage_token_arrays_are_what_transformers_gives(run_dir, hf_offline):
    """Each document's tokens in part-0.tokens.npy == AutoTokenizer ids + eos."""
    auto = transformers.AutoTokenizer.from_pretrained(
        str(run_dir / "tokenize" / "hf_tokenizer"), local_files_only=True
    )
    tokens = np.load(run_dir / "tokenize" / "part-00000.tokens.npy", allow_pickle=False)
    docs = pq.read_table(run_dir / "tokenize" / "part-00000.docs.parquet").to_pydict()
    texts = pq.read_table(run_dir / "download" / "part-00000.parquet").to_pydict()
    by_id = dict(zip(texts["id"], texts["text"], strict=True))
    ends = np.cumsum(docs["num_tokens"])
    for doc_id, end, n in list(zip(docs["id"], ends, docs["num_tokens"], strict=True))[:12]:
        want = auto(by_id[doc_id])["input_ids"] + [auto.eos_token_id]
        assert tokens[end - n : end].tolist() == want


def test_our_folder_matches_what_save_pretrained_keeps(run_dir, hf_offline, tmp_path):
    """transformers re-saving our folder keeps the same tokenizer and special tokens."""
    folder = run_dir / "tokenize" / "hf_tokenizer"
    auto = transformers.AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
    auto.save_pretrained(str(tmp_path / "resaved"))
    again = transformers.AutoTokenizer.from_pretrained(str(tmp_path / "resaved"))
    assert again.all_special_tokens == auto.all_special_tokens
    assert (again.eos_token, again.pad_token) == (auto.eos_token, auto.pad_token)
    assert [again(t)["input_ids"] for t in TEXTS] == [auto(t)["input_ids"] for t in TEXTS]


def test_tokenize_stage_needs_no_transformers(tmp_path, monkeypatch):
    """hf_tokenizer/ is plain JSON we write: the stage runs with transformers unimportable."""
    monkeypatch.setitem(sys.modules, "transformers", None)
    with pytest.raises(ImportError):
        import transformers as _  # noqa: F401
    stages = {"download": {"source": "toy", "max_docs": 60}, "tokenize": {"vocab_size": 300}}
    run_stages(tmp_path / "run", stages)
    config = json.loads((tmp_path / "run/tokenize/hf_tokenizer/tokenizer_config.json").read_text())
    assert config["eos_token"] == "<|endoftext|>" and config["pad_token"] == "<|pad|>"
    assert config["tokenizer_class"] == "PreTrainedTokenizerFast"


# ---------------------------------------------------------------- tokenizer.json in HF `tokenizers`


def test_hf_tokenizers_loads_our_file_with_identical_ids(tok, tmp_path):
    tokenizers = pytest.importorskip("tokenizers")
    path = tmp_path / "tokenizer.json"
    path.write_bytes(dumps(tok))
    hf = tokenizers.Tokenizer.from_file(str(path))
    corpus = MIXED + ["the cat sat on the mat 2024", "x" * 3000, "\n\n\n  \t"]
    for text in corpus:
        assert hf.encode(text).ids == tok.encode(text), text
        assert hf.decode(tok.encode(text), skip_special_tokens=False) == text
    back = load(path)
    assert back.vocab_size == tok.vocab_size
    assert all(back.encode(t) == tok.encode(t) for t in corpus)
    assert path.read_bytes() == dumps(back)


def test_load_rejects_non_bpe_file(tmp_path):
    bad = tmp_path / "tokenizer.json"
    bad.write_text('{"model": {"type": "WordPiece", "vocab": {}}}')
    with pytest.raises(DataError, match="model.type must be 'BPE'"):
        load(bad)
    bad.write_text("not json")
    with pytest.raises(DataError, match="tokenizer.json is not valid JSON"):
        load(bad)


def test_load_a_tokenizer_trained_by_hf(tmp_path):
    """A file HF's BpeTrainer wrote (stock ByteLevel pre-tokenizer, specials first, its own
    byte ids): we load it and give HF's ids, including for specials in the text."""
    tokenizers = pytest.importorskip("tokenizers")
    from tokenizers import decoders, models, pre_tokenizers, trainers

    hf = tokenizers.Tokenizer(models.BPE())
    hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    hf.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400,
        special_tokens=["<|endoftext|>", "<|pad|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    hf.train_from_iterator(MIXED * 5, trainer=trainer)
    path = tmp_path / "hf.json"
    hf.save(str(path))
    ours = load(path)
    assert ours.eos_id == hf.token_to_id("<|endoftext|>")
    for text in [*MIXED, "numbers 1234567 and 'quotes' \r\n"]:
        assert ours.encode(text) == hf.encode(text).ids, text
        assert ours.decode(ours.encode(text)) == text
    with patch.object(encoder, "MIN_VECTOR", 1):  # HF's own byte ids through the vectorised path
        texts = [*MIXED, "numbers 1234567 and 'quotes' \r\n"]
        assert load(path).encode_batch(texts) == [hf.encode(t).ids for t in texts]
