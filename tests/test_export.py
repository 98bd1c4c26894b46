"""`pipeline export`: stage documents and token shards round-trip through datasets, JSONL and
Parquet; OUT is written atomically and never silently replaced."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from helpers import run_stages
from pipeline.cli import main
from pipeline.errors import PipelineError
from pipeline.export import export
from pipeline.manifest import Manifest
from pipeline.parts import read_table
from pipeline.shards import npz_member

datasets = pytest.importorskip("datasets")


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """Every stage but quality on 300 toy documents (dedup adds `cluster`, toy adds `label`)."""
    out = tmp_path_factory.mktemp("export") / "run"
    stages = {
        "download": {"source": "toy", "max_docs": 300, "docs_per_part": 100},
        "clean": None,
        "dedup": {"ngram": 3},
        "tokenize": {"vocab_size": 400},
        "pack": {"seq_len": 128, "sequences_per_part": 100},
        "shard": {"shard_size": 64, "eval_fraction": 0.1},
    }
    run_stages(out, stages)
    return out


def kept(run_dir, stage):
    parts = [p for p in Manifest.load(run_dir).parts(stage) if p.suffix == ".parquet"]
    return pa.concat_tables([read_table(p) for p in parts])


def shard_arrays(run_dir, split):
    meta = json.loads((run_dir / "shard" / split / "metadata.json").read_text())
    files = [run_dir / "shard" / split / s["file"] for s in meta["shards"]]
    return {
        k: np.concatenate([np.asarray(npz_member(f, k)) for f in files])
        for k in ("input_ids", "segment_ids")
    }


def test_documents_round_trip_through_load_from_disk(run_dir, tmp_path, hf_offline):
    want = kept(run_dir, "dedup")
    assert {"text", "source", "label", "cluster"} <= set(want.column_names)
    done = export(run_dir, tmp_path / "out", "hf", "dedup", progress=False)
    ds = datasets.load_from_disk(str(tmp_path / "out"))
    assert isinstance(ds, datasets.Dataset)
    assert ds.column_names == want.column_names
    assert ds.to_dict() == want.to_pydict()
    assert done.rows == {"train": want.num_rows}
    assert not list(tmp_path.glob(".out*")), "temp folders are cleaned up"


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_documents_round_trip_as_plain_files(run_dir, tmp_path, hf_offline, fmt):
    """Plain files read back with their own reader and with datasets.load_dataset(OUT)."""
    want = kept(run_dir, "clean").to_pylist()
    out = tmp_path / "out"
    export(run_dir, out, fmt, "clean", progress=False)
    files = sorted(out.iterdir())
    assert [f.name for f in files] == [f"part-0000{i}.{fmt}" for i in range(3)]
    if fmt == "jsonl":
        rows = [json.loads(line) for f in files for line in f.read_text().splitlines()]
    else:
        rows = pa.concat_tables([pq.read_table(f) for f in files]).to_pylist()
    assert rows == want
    loaded = datasets.load_dataset(str(out), split="train")
    assert loaded["id"] == [r["id"] for r in want]
    assert loaded["text"] == [r["text"] for r in want]


def test_tokenize_stage_exports_input_ids_per_document(run_dir, tmp_path, hf_offline):
    export(run_dir, tmp_path / "out", "hf", "tokenize", progress=False)
    ds = datasets.load_from_disk(str(tmp_path / "out"))
    assert ds.features["input_ids"].feature.dtype == "int32"
    tokens = np.concatenate(
        [np.load(p) for p in Manifest.load(run_dir).parts("tokenize") if p.suffix == ".npy"]
    )
    assert np.array_equal(np.concatenate([np.array(x) for x in ds["input_ids"]]), tokens)
    assert [len(x) for x in ds["input_ids"]] == ds["num_tokens"]
    assert ds["id"] == kept(run_dir, "tokenize")["id"].to_pylist()


@pytest.mark.parametrize("fmt", ["hf", "parquet", "jsonl"])
def test_shards_round_trip_as_train_and_validation(run_dir, tmp_path, hf_offline, fmt):
    out = tmp_path / "out"
    done = export(run_dir, out, fmt, shards=True, progress=False)
    if fmt == "hf":
        dd = datasets.load_from_disk(str(out))
    else:
        dd = datasets.load_dataset(str(out))  # splits from the folder names
    assert sorted(dd) == ["train", "validation"]
    for split, folder in (("train", "train"), ("validation", "eval")):
        want = shard_arrays(run_dir, folder)
        got = dd[split].with_format("numpy")
        assert done.rows[split] == len(want["input_ids"])
        for key in ("input_ids", "segment_ids"):
            arr = np.stack(list(got[key]))
            assert arr.shape == want[key].shape and np.array_equal(arr, want[key]), (split, key)


def test_pack_stage_exports_sequences_with_their_sources(run_dir, tmp_path):
    export(run_dir, tmp_path / "out", "parquet", "pack", progress=False)
    got = pa.concat_tables([pq.read_table(p) for p in sorted((tmp_path / "out").iterdir())])
    parts = Manifest.load(run_dir).parts("pack")
    ids = np.concatenate([np.load(p) for p in parts if p.name.endswith(".input_ids.npy")])
    assert np.array_equal(np.stack(got["input_ids"].to_numpy(zero_copy_only=False)), ids)
    assert got.column_names[:2] == ["input_ids", "segment_ids"]
    assert "source" in got.column_names


def test_out_exists_refused_then_force_replaces(run_dir, tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    (out / "mine.txt").write_text("precious")
    args = ["export", str(run_dir), "--stage", "clean", "--to", "jsonl", str(out), "-q"]
    assert main(args) == 1
    err = capsys.readouterr().err
    assert err.strip() == f"error: {out} exists; choose a new folder or pass --force to replace it"
    assert (out / "mine.txt").read_text() == "precious"
    assert main([*args, "--force"]) == 0
    num = len(kept(run_dir, "clean"))
    assert capsys.readouterr().out.startswith(f"{out}: {num:,} rows (jsonl)")
    assert sorted(p.name for p in out.iterdir()) == [f"part-0000{i}.jsonl" for i in range(3)]


def test_a_failed_export_leaves_no_out(run_dir, tmp_path):
    with pytest.raises(PipelineError, match=r"stage 'quality' has no output \(finished stages: "):
        export(run_dir, tmp_path / "out", "hf", "quality", progress=False)
    with pytest.raises(PipelineError, match=r"shard writes token shards: export them wi"):
        export(run_dir, tmp_path / "out", "jsonl", "shard", progress=False)
    with pytest.raises(PipelineError, match=r"choose a folder outside"):
        export(run_dir, run_dir / "clean" / "x", "jsonl", "clean", progress=False)
    assert list(tmp_path.iterdir()) == []


def test_shards_feed_a_transformers_model(run_dir, tmp_path, hf_offline):
    """docs/sources.md's hand-off: exported shards + hf_tokenizer/ -> a causal LM's loss. An
    untrained model predicts ~uniformly, so the loss is close to ln(vocab size)."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    export(run_dir, tmp_path / "out", "hf", shards=True, progress=False)
    tok = transformers.AutoTokenizer.from_pretrained(str(run_dir / "tokenize" / "hf_tokenizer"))
    ds = datasets.load_from_disk(str(tmp_path / "out"))

    def to_model(batch):
        segs = batch["segment_ids"]
        return {
            "attention_mask": [[int(s > 0) for s in seg] for seg in segs],
            "labels": [
                [t if s > 0 else -100 for t, s in zip(ids, seg, strict=True)]
                for ids, seg in zip(batch["input_ids"], segs, strict=True)
            ],
        }

    train = ds["train"].map(to_model, batched=True, remove_columns=["segment_ids"])
    batch = transformers.default_data_collator([train[i] for i in range(4)])
    assert batch["input_ids"].shape == (4, 128) and batch["labels"].dtype == torch.int64
    assert int(batch["input_ids"].max()) < len(tok)
    torch.manual_seed(0)
    config = transformers.GPT2Config(
        vocab_size=len(tok),
        n_positions=128,
        n_embd=16,
        n_layer=1,
        n_head=2,
        bos_token_id=tok.eos_token_id,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
    )
    loss = transformers.GPT2LMHeadModel(config)(**batch).loss
    loss.backward()
    assert abs(loss.item() - np.log(len(tok))) < 0.5


def _damaged_copy(run_dir, tmp_path, name, damage):
    """A copy of the run with part `name` (a glob under the run) damaged by `damage(path)`."""
    import shutil

    run = tmp_path / "run"
    shutil.copytree(run_dir, run)
    part = sorted(run.glob(name))[0]
    damage(part)
    return run, part


def _truncate(path):
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


@pytest.mark.parametrize(
    "stage, name, damage, why",
    [
        ("clean", "clean/part-*.parquet", _truncate, "cannot read Parquet part"),
        ("tokenize", "tokenize/part-*.docs.parquet", _truncate, "cannot read Parquet part"),
        ("tokenize", "tokenize/part-*.tokens.npy", _truncate, "cannot read .npy part"),
        (
            "tokenize",
            "tokenize/part-*.tokens.npy",
            lambda p: np.save(p, np.array([None, 1]), allow_pickle=True),
            "cannot read .npy part",
        ),
        ("pack", "pack/part-*.input_ids.npy", _truncate, "cannot read .npy part"),
        ("pack", "pack/part-*.seqs.parquet", _truncate, "cannot read Parquet part"),
        (
            "pack",
            "pack/part-*.segment_ids.npy",
            lambda p: np.save(p, np.zeros((3, 7), np.uint16)),
            "segment_ids [3, 7]",
        ),
        (
            "pack",
            "pack/part-*.input_ids.npy",
            lambda p: np.save(p, np.zeros(5, np.uint16)),
            "input_ids [5]",
        ),
    ],
)
def test_a_damaged_stage_part_is_one_line_naming_it(
    run_dir, tmp_path, capsys, stage, name, damage, why
):
    """A truncated or rewritten part file: one error line naming the file and `pipeline data`
    (which re-runs the stage), never a pyarrow/numpy traceback; OUT is not written."""
    run, part = _damaged_copy(run_dir, tmp_path, name, damage)
    out = tmp_path / "out"
    assert main(["export", str(run), str(out), "--stage", stage, "--to", "jsonl", "-q"]) == 1
    err = capsys.readouterr().err
    stem = part.parent / part.name.split(".")[0]  # a shape error names the part's input_ids
    assert err.startswith(f"error: {stem}.") and why in err and "pipeline data" in err
    assert err.count("\n") == 1
    assert not out.exists()


@pytest.mark.parametrize("fmt", ["jsonl", "parquet", "hf"])
@pytest.mark.parametrize("shape", [(64,), (64, 10)])
def test_a_shard_of_another_shape_is_one_line_naming_it(run_dir, tmp_path, capsys, fmt, shape):
    """A .npz whose arrays are not [n, seq_len]: one line naming the shard, as the trainer
    formats say (not a ValueError on unpacking, not hf's ArrowTypeError on the cast)."""
    from pipeline.shards import save_npz

    def rewrite(path):
        save_npz(path, {k: np.zeros(shape, np.uint16) for k in ("input_ids", "segment_ids")})

    run, shard = _damaged_copy(run_dir, tmp_path, "shard/train/shard_*.npz", rewrite)
    out = tmp_path / "out"
    assert main(["export", str(run), str(out), "--shards", "--to", fmt, "-q"]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"error: {shard}: input_ids {list(shape)}") and "Traceback" not in err
    assert "(seq_len in metadata.json); re-run the shard stage" in err
    assert not out.exists()


@pytest.mark.parametrize("fmt", ["jsonl", "parquet", "hf"])
def test_a_shard_with_fewer_rows_than_its_metadata_is_one_line(run_dir, tmp_path, capsys, fmt):
    """A shard that lost rows (metadata.json lists more): refused as the loader refuses it,
    not exported short."""
    from pipeline.shards import save_npz

    def cut(path):
        with np.load(path, allow_pickle=False) as z:
            arrays = {k: z[k][:-1] for k in z.files}
        save_npz(path, arrays)

    run, shard = _damaged_copy(run_dir, tmp_path, "shard/train/shard_*.npz", cut)
    out = tmp_path / "out"
    assert main(["export", str(run), str(out), "--shards", "--to", fmt, "-q"]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"error: {shard}: has ") and "metadata.json says" in err
    assert err.count("\n") == 1 and not out.exists()
