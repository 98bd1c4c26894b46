"""`pipeline export --shards --to megatron|mds|nanogpt|litdata`: each format read back with the
trainer's own reader (megatron-core, mosaicml-streaming, np.memmap, litdata) equals our shards,
sequence by sequence and boundary by boundary."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from pipeline.errors import PipelineError
from pipeline.export import export
from pipeline.exporters import litdata as litdata_writer
from pipeline.exporters import mds as mds_writer
from pipeline.exporters.common import segments
from pipeline.shards import save_npz, shard_name

SEQ_LEN, EOS, PAD = 16, 1, 0


def _rows(rng: np.random.Generator, n: int, vocab: int) -> tuple[np.ndarray, np.ndarray]:
    """n packed rows: 1-4 segments each, a random tail of padding; most segments end in EOS,
    some do not (pieces of a long document), one row is full."""
    dtype = np.uint16 if vocab <= 1 << 16 else np.uint32
    ids = np.full((n, SEQ_LEN), PAD, dtype)
    seg = np.zeros((n, SEQ_LEN), np.uint16)
    for r in range(n):
        pos, k = 0, 0
        fill = SEQ_LEN if r == 0 else int(rng.integers(1, SEQ_LEN + 1))
        while pos < fill:
            k += 1
            length = min(int(rng.integers(1, 7)), fill - pos)
            ids[r, pos : pos + length] = rng.integers(2, vocab, length)
            if rng.random() < 0.7:
                ids[r, pos + length - 1] = EOS
            seg[r, pos : pos + length] = k
            pos += length
    return ids, seg


def make_run(root: Path, vocab: int = 300, sizes=None, seed: int = 0) -> Path:
    """A run folder holding only shard/train and shard/eval (metadata.json as the stage writes)."""
    rng = np.random.default_rng(seed)
    sizes = sizes or {"train": [37, 20], "eval": [9]}
    for folder, shard_sizes in sizes.items():
        out = root / "shard" / folder
        out.mkdir(parents=True)
        entries = []
        for i, n in enumerate(shard_sizes):
            ids, seg = _rows(rng, n, vocab)
            save_npz(out / shard_name(i), {"input_ids": ids, "segment_ids": seg})
            entries.append({"file": shard_name(i), "num_samples": n, "sha256": "x"})
        meta = {
            "num_samples": sum(shard_sizes),
            "seq_len": SEQ_LEN,
            "dtype": ids.dtype.name,
            "fields": ["input_ids", "segment_ids"],
            "field_dtypes": {"input_ids": ids.dtype.name, "segment_ids": "uint16"},
            "vocab_size": vocab,
            "eos_id": EOS,
            "pad_id": PAD,
            "tokenizer_sha256": "ab" * 32,
            "shards": entries,
        }
        (out / "metadata.json").write_text(json.dumps(meta))
    return root


def shard_rows(run: Path, folder: str) -> tuple[np.ndarray, np.ndarray]:
    out = run / "shard" / folder
    meta = json.loads((out / "metadata.json").read_text())
    data = [np.load(out / s["file"], allow_pickle=False) for s in meta["shards"]]
    return (
        np.concatenate([d["input_ids"] for d in data]),
        np.concatenate([d["segment_ids"] for d in data]),
    )


def reference_segments(ids: np.ndarray, seg: np.ndarray) -> list[np.ndarray]:
    """The segments of each row, one Python loop per token: the obvious reading."""
    out = []
    for row_ids, row_seg in zip(ids, seg, strict=True):
        cur, last = [], 0
        for t, s in zip(row_ids.tolist(), row_seg.tolist(), strict=True):
            if s != last and cur:
                out.append(np.array(cur))
                cur = []
            if s:
                cur.append(t)
            last = s
        if cur:
            out.append(np.array(cur))
    return out


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    return make_run(tmp_path_factory.mktemp("exporters"))


def test_segments_worked_example():
    tokens, lengths = segments(np.array([[5, 6, 7, 0]]), np.array([[1, 1, 2, 0]]))
    assert tokens.tolist() == [5, 6, 7] and lengths.tolist() == [2, 1]
    # two rows, the second full with one segment; segment ids restart per row
    tokens, lengths = segments(np.array([[3, 4, 0], [8, 9, 9]]), np.array([[1, 1, 0], [1, 1, 1]]))
    assert tokens.tolist() == [3, 4, 8, 9, 9] and lengths.tolist() == [2, 3]


def test_segments_match_the_reference_on_random_rows():
    ids, seg = _rows(np.random.default_rng(3), 200, 300)
    tokens, lengths = segments(ids, seg)
    want = reference_segments(ids, seg)
    assert lengths.tolist() == [len(w) for w in want]
    assert tokens.tolist() == np.concatenate(want).tolist()


def test_megatron_indexed_dataset_reads_every_sequence(run, tmp_path):
    indexed = pytest.importorskip("megatron.core.datasets.indexed_dataset")
    done = export(run, tmp_path / "m", "megatron", shards=True, progress=False)
    for folder, split in (("train", "train"), ("eval", "val")):
        want = reference_segments(*shard_rows(run, folder))
        ds = indexed.IndexedDataset(str(tmp_path / "m" / split))
        assert len(ds) == len(want) == done.rows[split]
        assert ds.sequence_lengths.tolist() == [len(w) for w in want]
        assert ds.document_indices.tolist() == list(range(len(want) + 1))  # one doc per sequence
        assert all(ds[i].tolist() == w.tolist() for i, w in enumerate(want))
        assert ds[0].dtype == np.uint16
    assert sorted(p.name for p in (tmp_path / "m").iterdir()) == [
        "train.bin", "train.idx", "val.bin", "val.idx"
    ]  # fmt: skip


@pytest.mark.slow
def test_megatron_wide_vocab_is_int32(tmp_path):
    indexed = pytest.importorskip("megatron.core.datasets.indexed_dataset")
    run = make_run(tmp_path / "run", vocab=70_000, sizes={"train": [12]})
    export(run, tmp_path / "m", "megatron", shards=True, progress=False)
    ds = indexed.IndexedDataset(str(tmp_path / "m" / "train"))
    want = reference_segments(*shard_rows(run, "train"))
    assert ds[0].dtype == np.int32
    assert [ds[i].tolist() for i in range(len(ds))] == [w.tolist() for w in want]
    assert max(int(w.max()) for w in want) > 65535  # ids a uint16 could not hold


def test_megatron_index_layout(run, tmp_path):
    """The .idx parsed by hand from the layout megatron.py documents (the fast check; the slow
    test reads it with megatron-core itself)."""
    export(run, tmp_path / "m", "megatron", shards=True, progress=False)
    want = reference_segments(*shard_rows(run, "train"))
    raw = (tmp_path / "m" / "train.idx").read_bytes()
    assert raw[:9] == b"MMIDIDX\x00\x00" and raw[9:17] == (1).to_bytes(8, "little")
    assert raw[17] == 8  # uint16's code
    n, docs = np.frombuffer(raw[18:34], np.uint64).tolist()
    assert n == len(want) and docs == n + 1
    lengths = np.frombuffer(raw, np.int32, n, 34)
    pointers = np.frombuffer(raw, np.int64, n, 34 + 4 * n)
    doc_idx = np.frombuffer(raw, np.int64, docs, 34 + 12 * n)
    assert len(raw) == 34 + 12 * n + 8 * docs
    tokens = np.fromfile(tmp_path / "m" / "train.bin", np.uint16)
    for w, length, ptr in zip(want, lengths, pointers, strict=True):
        assert length == len(w) and tokens[ptr // 2 : ptr // 2 + length].tolist() == w.tolist()
    assert doc_idx.tolist() == list(range(n + 1))


def test_mds_shard_layout(run, tmp_path, monkeypatch):
    """Each MDS shard: sample count, offsets from the file start, the config, then each row's
    segment_ids and tokens bytes (the fast check; the slow test reads it with streaming)."""
    monkeypatch.setattr(mds_writer, "SIZE_LIMIT", 2000)
    export(run, tmp_path / "mds", "mds", shards=True, progress=False)
    ids, seg = shard_rows(run, "train")
    index = json.loads((tmp_path / "mds" / "train" / "index.json").read_text())
    got_ids, got_seg = [], []
    for shard in index["shards"]:
        raw = (tmp_path / "mds" / "train" / shard["raw_data"]["basename"]).read_bytes()
        n = int(np.frombuffer(raw, np.uint32, 1)[0])
        offsets = np.frombuffer(raw, np.uint32, n + 1, 4)
        assert n == shard["samples"] and offsets[-1] == len(raw) == shard["raw_data"]["bytes"]
        assert len(raw) <= 2000  # MDSWriter's accounting: the whole file within size_limit
        for a, b in zip(offsets[:-1], offsets[1:], strict=True):
            got_seg.append(np.frombuffer(raw[a : a + 2 * SEQ_LEN], np.uint16))
            got_ids.append(np.frombuffer(raw[a + 2 * SEQ_LEN : b], np.int32))
    assert np.array(got_ids).tolist() == ids.tolist() and np.array(got_seg).tolist() == seg.tolist()
    assert len(index["shards"]) > 3


def _eos_stream(want: list[np.ndarray]) -> list[int]:
    return [t for w in want for t in (w.tolist() + ([] if w[-1] == EOS else [EOS]))]


@pytest.mark.parametrize("vocab", [300, 70_000])
def test_nanogpt_bins_are_the_documents_separated_by_eos(tmp_path, vocab):
    run = make_run(tmp_path / "run", vocab=vocab)
    done = export(run, tmp_path / "n", "nanogpt", shards=True, progress=False)
    meta = json.loads((tmp_path / "n" / "meta.json").read_text())
    dtype = np.uint16 if vocab <= 65536 else np.uint32
    assert meta["dtype"] == np.dtype(dtype).name and meta["vocab_size"] == vocab
    for folder, split in (("train", "train"), ("eval", "val")):
        data = np.memmap(tmp_path / "n" / f"{split}.bin", dtype=dtype, mode="r")  # nanoGPT's read
        want = _eos_stream(reference_segments(*shard_rows(run, folder)))
        assert data.tolist() == want
        assert meta["num_tokens"][split] == done.rows[split] == len(want)
        assert PAD not in want  # padding dropped (no real token is 0 here)


MDS_SCRIPT = r"""
import json, sys, types, importlib.machinery
import numpy as np
try:
    import torchvision  # noqa: F401
except Exception:  # streaming imports its vision datasets at import; a stub stands in for
    # torchvision where no build matches the installed torch (CPU torch here)
    def mod(name, **kw):
        m = types.ModuleType(name)
        m.__spec__ = importlib.machinery.ModuleSpec(name, None)
        m.__dict__.update(kw)
        sys.modules[name] = m
    mod("torchvision"); mod("torchvision.transforms")
    mod("torchvision.datasets", VisionDataset=object, CIFAR10=None)
    mod("torchvision.transforms.functional", to_tensor=None)
from streaming import MDSWriter, StreamingDataset
local, ref, size_limit = sys.argv[1], sys.argv[2], int(sys.argv[3])
ds = StreamingDataset(local=local, shuffle=False, batch_size=1)
rows = [ds[i] for i in range(len(ds))]
cols = json.load(open(local + "/index.json"))["shards"][0]
columns = dict(zip(cols["column_names"], cols["column_encodings"]))
with MDSWriter(out=ref, columns=columns, size_limit=size_limit) as w:
    for r in rows:
        w.write(r)
print(json.dumps({
    "tokens": [r["tokens"].tolist() for r in rows],
    "segment_ids": [r["segment_ids"].tolist() for r in rows],
    "dtypes": [str(rows[0]["tokens"].dtype), str(rows[0]["segment_ids"].dtype)],
}))
"""


def test_mds_reads_back_with_streaming_and_matches_mdswriter_bytes(run, tmp_path, monkeypatch):
    """streaming's StreamingDataset reads every row (subprocess: it imports torchvision, which
    is stubbed there when absent); MDSWriter given those rows writes the same bytes, shard
    boundaries included (a small size limit makes several shards)."""
    import importlib.util

    if importlib.util.find_spec("streaming") is None:
        pytest.skip("mosaicml-streaming is not installed")
    monkeypatch.setattr(mds_writer, "SIZE_LIMIT", 2000)  # ~20 rows of 96 bytes per shard
    export(run, tmp_path / "mds", "mds", shards=True, progress=False)
    ids, seg = shard_rows(run, "train")
    local, ref = tmp_path / "mds" / "train", tmp_path / "ref"
    proc = subprocess.run(
        [sys.executable, "-c", MDS_SCRIPT, str(local), str(ref), "2000"],
        capture_output=True,
        text=True,
        timeout=300,
        env={"PATH": "/usr/bin:/bin", "STREAMING_NO_NETWORK": "1", "HOME": str(tmp_path)},
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["tokens"] == ids.astype(np.int32).tolist()
    assert got["segment_ids"] == seg.tolist()
    assert got["dtypes"] == ["int32", "uint16"]
    mine = sorted(p.name for p in local.iterdir())
    assert len(mine) > 3 and mine == sorted(p.name for p in ref.iterdir())
    for name in mine:
        assert (local / name).read_bytes() == (ref / name).read_bytes(), name


def test_litdata_streaming_dataset_reads_the_rows(run, tmp_path, monkeypatch):
    litdata = pytest.importorskip("litdata")
    monkeypatch.setattr(litdata_writer, "CHUNK_BYTES", 10 * SEQ_LEN * 2)  # 10 rows a chunk
    export(run, tmp_path / "ld", "litdata", shards=True, progress=False)
    for folder, split in (("train", "train"), ("eval", "val")):
        ids, _ = shard_rows(run, folder)
        ds = litdata.StreamingDataset(
            str(tmp_path / "ld" / split),
            item_loader=litdata.TokensLoader(block_size=SEQ_LEN),
            shuffle=False,
        )
        assert len(ds) == len(ids)
        got = np.stack([np.asarray(ds[i]) for i in range(len(ds))])
        assert got.tolist() == ids.tolist()
    assert len(list((tmp_path / "ld" / "train").glob("chunk-*.bin"))) == 6  # 57 rows / 10


@pytest.mark.parametrize("fmt", ["megatron", "mds", "nanogpt", "litdata"])
def test_export_is_atomic_deterministic_and_never_replaces_silently(run, tmp_path, fmt):
    out = tmp_path / "out"
    export(run, out, fmt, shards=True, progress=False)
    first = {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    with pytest.raises(PipelineError, match="exists; choose a new folder or pass --force"):
        export(run, out, fmt, shards=True, progress=False)
    export(run, out, fmt, shards=True, force=True, progress=False)
    again = {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    assert again == first  # same shards, same bytes
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]  # no temp folder left


def test_trainer_formats_need_shards_and_a_shard_stage(run, tmp_path):
    with pytest.raises(PipelineError, match="--to nanogpt writes the token shards.*--shards"):
        export(run, tmp_path / "o", "nanogpt", stage="tokenize", progress=False)
    (tmp_path / "empty").mkdir()
    with pytest.raises(PipelineError, match="no shards"):
        export(tmp_path / "empty", tmp_path / "o", "megatron", shards=True, progress=False)
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("fmt", ["megatron", "mds", "nanogpt", "litdata"])
@pytest.mark.parametrize(
    "key, value, field",
    [
        ("vocab_size", "abc", "vocab_size"),
        ("dtype", "foo", "dtype"),
        ("eos_id", "x", "eos_id"),
        ("seq_len", 0, "seq_len"),
        ("seq_len", -5, "seq_len"),
        ("shards", [{"file": "../eval/shard_000000.npz", "num_samples": 9}], "shards[0].file"),
        ("shards", [{"file": "shard_000000.npz", "num_samples": "x"}], "shards[0].num_samples"),
    ],
)
def test_bad_metadata_is_one_line_naming_the_field(tmp_path, capsys, fmt, key, value, field):
    """A hand-edited metadata.json: the loader's schema (what --to jsonl/hf check) names the
    field, never a ValueError/TypeError/ZeroDivisionError from inside a writer."""
    from pipeline.cli import main

    run = make_run(tmp_path / "run")
    path = run / "shard" / "train" / "metadata.json"
    meta = json.loads(path.read_text())
    del meta["num_samples"]  # a shorter shard list is not the error under test
    if key == "dtype":
        del meta["vocab_size"]  # without it, the writers read dtype
    meta[key] = value
    path.write_text(json.dumps(meta))
    out = tmp_path / "out"
    assert main(["export", str(run), str(out), "--shards", "--to", fmt, "-q"]) == 1
    err = capsys.readouterr().err
    assert f"{path}: field '{field}'" in err and "Traceback" not in err
    assert not out.exists()


def test_cli_exports_megatron(run, tmp_path, capsys):
    from pipeline.cli import main

    assert main(["export", str(run), str(tmp_path / "m"), "--shards", "--to", "megatron"]) == 0
    out = capsys.readouterr().out
    assert "sequences (megatron)" in out and "IndexedDataset" in out


@pytest.mark.slow
def test_megatron_gpt_dataset_builds_its_samples_from_the_export(tmp_path):
    """Megatron's own GPTDataset (what pretrain_gpt.py trains on) builds train and valid
    samples of its --seq-length from the export: each sample is a window of our documents
    concatenated in GPTDataset's document order."""
    pytest.importorskip("megatron.core.datasets.gpt_dataset")
    from megatron.core.datasets.blended_megatron_dataset_builder import (
        BlendedMegatronDatasetBuilder,
    )
    from megatron.core.datasets.gpt_dataset import GPTDataset, GPTDatasetConfig

    class Tok:  # what GPTDataset reads of a tokenizer
        eod, pad, vocab_size = EOS, PAD, 300
        unique_identifiers = {"class": "Tok"}

    run = make_run(tmp_path / "run", sizes={"train": [200, 200], "eval": [50]})
    out = tmp_path / "m"
    export(run, out, "megatron", shards=True, progress=False)
    cfg = GPTDatasetConfig(
        random_seed=1234,
        sequence_length=16,
        blend_per_split=[([str(out / "train")], None), ([str(out / "val")], None), None],
        tokenizer=Tok(),
        reset_position_ids=False,
        reset_attention_mask=False,
        eod_mask_loss=False,
        path_to_cache=str(tmp_path / "cache"),
        mid_level_dataset_surplus=0.005,
    )
    train, valid, _ = BlendedMegatronDatasetBuilder(
        GPTDataset, [10, 2, 0], lambda: True, cfg
    ).build()
    docs = reference_segments(*shard_rows(run, "train"))
    # GPTDataset concatenates the documents in its shuffled document_index order
    stream = [t for d in train.document_index.tolist() for t in docs[d].tolist()]
    text = "," + ",".join(map(str, stream)) + ","
    for i in range(8):
        s = train[i]
        window = [*s["tokens"].tolist(), int(s["labels"][-1])]
        assert "," + ",".join(map(str, window)) + "," in text  # a window of that stream
    assert len(train) >= 10 and len(valid) >= 2
