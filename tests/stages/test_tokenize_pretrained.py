"""tokenize.pretrained: a Hugging Face tokenizer.json (BPE, Unigram, WordPiece) used as is; ids
equal the `tokenizers` library's own on the text, eos / pad from the tokenizer or the recipe, the
tokenizer's sha256 down to the shard metadata."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pyarrow.parquet as pq
import pytest

from helpers import run_stages
from pipeline.errors import RecipeError
from synth_text import sentence

tokenizers = pytest.importorskip("tokenizers")
Tokenizer = tokenizers.Tokenizer
decoders, models, normalizers = tokenizers.decoders, tokenizers.models, tokenizers.normalizers
pre_tokenizers, processors = tokenizers.pre_tokenizers, tokenizers.processors
trainers = tokenizers.trainers

EXTRA = ["Ünïcödé café — naïve façade!", "我们 喜欢 学校 老师", "tabs\tand\nnew lines  ", "x" * 300]


def _texts(n: int = 60) -> list[str]:
    rng = np.random.default_rng(4)
    docs = [" ".join(sentence(rng) for _ in range(int(rng.integers(1, 6)))) for _ in range(n)]
    return docs + EXTRA


def _bpe(texts) -> Tokenizer:
    """GPT-2 style: byte-level BPE with <|endoftext|> and no pad token."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400,
        special_tokens=["<|endoftext|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(texts, trainer)
    return tok


def _wordpiece(texts) -> Tokenizer:
    """BERT style: WordPiece, lowercasing normalizer, [CLS] $A [SEP] post-processor."""
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]"]
    tok.train_from_iterator(
        texts, trainers.WordPieceTrainer(vocab_size=300, special_tokens=specials)
    )
    cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", special_tokens=[("[CLS]", cls), ("[SEP]", sep)]
    )
    return tok


def _unigram(texts) -> Tokenizer:
    """T5 / Llama style: Unigram over Metaspace pieces, </s> and <pad> named in a config."""
    tok = Tokenizer(models.Unigram())
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.decoder = decoders.Metaspace()
    trainer = trainers.UnigramTrainer(
        vocab_size=300, special_tokens=["<pad>", "</s>", "<unk>"], unk_token="<unk>"
    )
    tok.train_from_iterator(texts, trainer)
    return tok


def _run(tmp_path, tok: Tokenizer, stages=None, config=None, **cfg):
    texts = _texts()
    folder = tmp_path / "tok"
    folder.mkdir(parents=True)
    tok.save(str(folder / "tokenizer.json"))
    if config is not None:
        (folder / "tokenizer_config.json").write_text(json.dumps(config))
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))
    run = tmp_path / "run"
    tokenize = {"pretrained": str(folder / "tokenizer.json"), "heldout_fraction": 0.0, **cfg}
    run_stages(
        run,
        {"download": {"source": "jsonl", "path": str(src)}, "tokenize": tokenize, **(stages or {})},
    )
    return run, texts, folder / "tokenizer.json"


def _check_ids(run, texts, path) -> dict:
    """Every document's tokens == the library's encode(text).ids, eos appended unless the
    post-processor already ended the document with it."""
    tok = Tokenizer.from_file(str(path))
    meta = json.loads((run / "tokenize" / "meta.json").read_text())
    eos = meta["eos_id"]
    want = []
    for text in texts:
        ids = tok.encode(text).ids
        want.append(ids if ids and ids[-1] == eos else [*ids, eos])
    parts = sorted((run / "tokenize").glob("part-*.tokens.npy"))
    got = np.concatenate([np.load(p, allow_pickle=False) for p in parts]).tolist()
    docs = sorted((run / "tokenize").glob("part-*.docs.parquet"))
    lengths = np.concatenate([pq.read_table(p).column("num_tokens").to_numpy() for p in docs])
    lengths = lengths.tolist()
    assert lengths == [len(w) for w in want]
    assert got == [t for w in want for t in w]
    assert meta["tokenizer_sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    assert (run / "tokenize" / "tokenizer.json").read_bytes() == path.read_bytes()
    return meta


def test_wordpiece_ids_equal_the_library_and_sha_reaches_the_shards(tmp_path):
    tok = _wordpiece(_texts())
    stages = {"pack": {"seq_len": 64}, "shard": {"shard_size": 16, "eval_fraction": 0.0}}
    run, texts, path = _run(tmp_path, tok, stages)
    meta = _check_ids(run, texts, path)
    assert meta["eos_id"] == tok.token_to_id("[SEP]") and meta["pad_id"] == tok.token_to_id("[PAD]")
    shard_meta = json.loads((run / "shard" / "train" / "metadata.json").read_text())
    assert shard_meta["tokenizer_sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    assert (
        shard_meta["pad_id"] == meta["pad_id"] and shard_meta["vocab_size"] == tok.get_vocab_size()
    )
    report = json.loads((run / "pipeline_report.json").read_text())
    stats = next(s for s in report["stages"] if s["stage"] == "tokenize")["stats"]
    assert (
        stats["tokenizer_model"] == "WordPiece" and stats["eos_pad_from"] == "tokenizer/tokenizer"
    )
    assert stats["encode_tokens_per_s"] > 0 and stats["encode_wall_tokens_per_s"] > 0
    hf_dir = run / "tokenize" / "hf_tokenizer"
    assert json.loads((hf_dir / "special_tokens_map.json").read_text()) == {
        "eos_token": "[SEP]", "pad_token": "[PAD]"
    }  # fmt: skip


def test_unigram_roles_from_its_tokenizer_config(tmp_path):
    tok = _unigram(_texts())
    config = {"eos_token": {"content": "</s>"}, "pad_token": "<pad>"}
    run, texts, path = _run(tmp_path, tok, config=config)
    meta = _check_ids(run, texts, path)
    assert meta["eos_id"] == tok.token_to_id("</s>") and meta["pad_id"] == tok.token_to_id("<pad>")


def test_bpe_without_pad_takes_the_recipe_pad_else_names_the_key(tmp_path):
    tok = _bpe(_texts())
    run, texts, path = _run(tmp_path / "a", tok, pad_token="<|endoftext|>")
    meta = _check_ids(run, texts, path)
    assert meta["eos_id"] == meta["pad_id"] == tok.token_to_id("<|endoftext|>")
    with pytest.raises(RecipeError, match=r"tokenize\.pad_token: .* names no pad token"):
        _run(tmp_path / "b", tok)
    with pytest.raises(RecipeError, match=r"tokenize\.pad_token: '<nope>' is not in"):
        _run(tmp_path / "c", tok, pad_token="<nope>")
