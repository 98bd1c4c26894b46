"""Source `hf`: Hugging Face datasets built on disk by the test, read offline."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from helpers import make_recipe, run_stages
from pipeline.cli import main
from pipeline.errors import DataError, RecipeError
from pipeline.manifest import Manifest
from pipeline.parts import read_table
from pipeline.report import load_report

datasets = pytest.importorskip("datasets")

TEXTS = [f"document number {i} says something about {'rivers ' * (i % 4)}" for i in range(30)]


def docs(run_dir):
    parts = Manifest.load(run_dir).parts("download")
    return pa.concat_tables([read_table(p) for p in parts]).to_pydict()


def stats(run_dir):
    return next(s["stats"] for s in load_report(run_dir)["stages"] if s["stage"] == "download")


def hf_download(run_dir, **block):
    run_stages(run_dir, {"download": {"source": "hf", "docs_per_part": 8, **block}})
    return docs(run_dir)


def arrow_files(folder):
    return sorted(p.name for p in folder.rglob("*.arrow")) if folder.exists() else []


def test_save_to_disk_folder_with_ids_and_bad_records(tmp_path, hf_offline):
    """A null text is counted as dropped_text_not_string (1 of 31 < 5%) and kept in rejected/."""
    rows = {"text": TEXTS + [None], "uid": [f"u{i}" for i in range(31)], "n": list(range(31))}
    folder = tmp_path / "saved"
    datasets.Dataset.from_dict(rows).save_to_disk(str(folder))
    got = hf_download(tmp_path / "run", hf_path=str(folder), id_field="uid")
    assert got["text"] == TEXTS
    assert got["id"] == [f"u{i}" for i in range(30)]
    assert set(got["source"]) == {"saved"}
    s = stats(tmp_path / "run")
    assert (s["docs_in"], s["docs_out"], s["dropped_text_not_string"]) == (31, 30, 1)
    rejected = read_table(tmp_path / "run" / "download" / "rejected" / "part-00000.parquet")
    assert rejected.column("id").to_pylist() == [f"{folder}[train]:row 30"]


def test_dataset_dict_split_and_made_ids(tmp_path, hf_offline):
    """Without an id column, ids are <source>:<split>:<row> (0-based, as ds[i])."""
    folder = tmp_path / "dd"
    dd = datasets.DatasetDict(
        {
            "train": datasets.Dataset.from_dict({"body": TEXTS[:20]}),
            "test": datasets.Dataset.from_dict({"body": TEXTS[20:]}),
        }
    )
    dd.save_to_disk(str(folder))
    got = hf_download(tmp_path / "run", hf_path=str(folder), split="test", text_field="body")
    assert got["text"] == TEXTS[20:]
    assert got["id"] == [f"dd:test:{i}" for i in range(10)]
    with pytest.raises(DataError, match=r"no split 'validation'; the splits there are: train, t"):
        hf_download(tmp_path / "run2", hf_path=str(folder), split="validation", text_field="body")


def write_json_folder(folder, splits):
    folder.mkdir()
    for split, texts in splits.items():
        lines = [json.dumps({"text": t, "id": f"{split}-{i}"}) for i, t in enumerate(texts)]
        (folder / f"{split}.jsonl").write_text("\n".join(lines) + "\n")


def test_local_data_folder_through_load_dataset(tmp_path, hf_offline):
    """A JSON data folder is prepared into the datasets cache under tmp_path (never ~/.cache)."""
    folder = tmp_path / "corpus"
    write_json_folder(folder, {"train": TEXTS[:25], "test": TEXTS[25:]})
    got = hf_download(tmp_path / "run", hf_path=str(folder), max_docs=12)
    assert got["text"] == TEXTS[:12]
    assert got["id"] == [f"train-{i}" for i in range(12)]
    assert got["source"] == ["corpus"] * 12
    assert arrow_files(hf_offline), "non-streaming reads prepare Arrow files in the cache"
    sliced = hf_download(tmp_path / "run2", hf_path=str(folder), split="test[2:4]")
    assert sliced["text"] == TEXTS[27:29] and sliced["id"] == ["test-2", "test-3"]


def test_streaming_never_materialises_the_split(tmp_path, hf_offline):
    """Streaming reads the Parquet files batch by batch and stops at max_docs: the last file is
    garbage, yet 1,000 rows read fine (1,024-row batches end in file 2), and no Arrow file is
    written into the datasets cache (a non-streaming read writes one, test above). Reading on
    past max_docs reaches the bad file and stops with one line naming the failure."""
    folder = tmp_path / "pq"
    (folder / "data").mkdir(parents=True)
    texts = [f"row {i} " + "words " * (i % 7) for i in range(3000)]
    for k in range(2):
        table = pa.table({"text": texts[k * 1000 : (k + 1) * 1000]})
        pq.write_table(table, folder / "data" / f"train-0000{k}-of-00003.parquet")
    (folder / "data" / "train-00002-of-00003.parquet").write_bytes(b"PAR1 truncated")
    got = hf_download(tmp_path / "run", hf_path=str(folder), streaming=True, max_docs=1000)
    assert got["text"] == texts[:1000]
    assert got["id"] == [f"pq:train:{i}" for i in range(1000)]
    assert arrow_files(hf_offline) == []
    with pytest.raises(DataError, match=r"pq: reading failed \("):
        hf_download(tmp_path / "run2", hf_path=str(folder), streaming=True)


@pytest.mark.parametrize("streaming", [False, True])
def test_missing_split_lists_the_splits_in_one_line(tmp_path, hf_offline, capsys, streaming):
    folder = tmp_path / "corpus"
    write_json_folder(folder, {"train": TEXTS[:5], "test": TEXTS[5:10]})
    recipe = tmp_path / "r.yaml"
    block = {"source": "hf", "hf_path": str(folder), "split": "validation", "streaming": streaming}
    recipe.write_text(json.dumps({"out_dir": str(tmp_path / "run"), "download": block}))
    assert main(["data", "--config", str(recipe), "-q"]) == 1
    err = capsys.readouterr().err.strip()
    assert "\n" not in err
    assert err.startswith("error: ")
    assert "no split 'validation'; the splits there are: train, test" in err


def test_text_column_missing_or_not_strings(tmp_path, hf_offline):
    folder = tmp_path / "saved"
    datasets.Dataset.from_dict({"content": ["a", "b"], "n": [1, 2]}).save_to_disk(str(folder))
    with pytest.raises(DataError, match=r"no column 'text' \(columns: content, n\)"):
        hf_download(tmp_path / "r1", hf_path=str(folder))
    with pytest.raises(DataError, match=r"column 'n' holds .*int64.*string columns: content"):
        hf_download(tmp_path / "r2", hf_path=str(folder), text_field="n")


def test_recipe_checks_hf_path(tmp_path):
    with pytest.raises(RecipeError, match=r"download.hf_path: is required when source is 'hf'"):
        make_recipe(tmp_path / "run", {"download": {"source": "hf"}})
    with pytest.raises(RecipeError, match=r"download.hf_path: no file or folder"):
        make_recipe(tmp_path / "run", {"download": {"source": "hf", "hf_path": "./nope/x"}})
    block = {"source": "hf", "hf_path": "org/name", "streaming": True, "split": "train[:10]"}
    with pytest.raises(RecipeError, match=r"download.split: slicing \('train\[:10\]'\) needs str"):
        make_recipe(tmp_path / "run", {"download": block})
    block["streaming"] = False
    recipe = make_recipe(tmp_path / "run", {"download": block})
    assert recipe.stages["download"].split == "train[:10]"


def test_hub_name_offline_says_what_to_do(tmp_path, hf_offline):
    with pytest.raises(DataError, match=r"not available offline and the hub is unreachable") as e:
        hf_download(tmp_path / "run", hf_path="someone/not-cached-anywhere")
    assert "unset HF_HUB_OFFLINE" in e.value.hints[0] and "--jsonl" in e.value.hints[2]
