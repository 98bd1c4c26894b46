"""Any Hugging Face `datasets` dataset as a source: a hub name, a local data folder or dataset
script (through `datasets.load_dataset`), or a `save_to_disk` folder (`datasets.load_from_disk`).

Rows are read in Arrow batches of the text (and id) column only, so wide rows (images, metadata)
are never decoded. With `streaming`, rows come from an `IterableDataset`: nothing is prepared in
the datasets cache and the split is never materialised; the download stage stops at max_docs.
The cache, offline mode and tokens follow the usual HF variables (HF_HOME, HF_DATASETS_CACHE,
HF_HUB_OFFLINE, HF_TOKEN). A null or non-string text is yielded as `Malformed`, never raised.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pipeline.errors import DataError, RecipeError
from pipeline.sources.records import Malformed, Record, fix_surrogates

ABOUT = "any Hugging Face datasets dataset: hub name, local data folder or save_to_disk folder"
BATCH_ROWS = 1024  # rows per Arrow batch: ~1 MB of text for 1 kB documents
_STRING_TYPES = ("string", "large_string")


def is_saved_dataset(path: str) -> bool:
    """True for a folder written by `Dataset.save_to_disk` or `DatasetDict.save_to_disk`."""
    p = Path(path).expanduser()
    return (p / "state.json").is_file() or (p / "dataset_dict.json").is_file()


def looks_local(path: str) -> bool:
    """A filesystem path rather than a hub name (`org/name`): it exists, or is spelled as one."""
    return Path(path).expanduser().exists() or path.startswith(("/", "./", "../", "~"))


def source_name(hf_path: str) -> str:
    """The `source` column: the folder name for a local path, the hub id (org/name) otherwise."""
    if looks_local(hf_path):
        return Path(hf_path).expanduser().resolve().name or hf_path
    return hf_path


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")


def _no_split(hf_path: str, split: str, splits: list[str]) -> DataError:
    return DataError(
        hf_path,
        f"no split {split!r}; the splits there are: {', '.join(splits) or '(none)'}; "
        "set download.split",
    )


def _split_names(hf_path: str, hf_name: str | None, revision: str | None) -> list[str] | None:
    import datasets

    try:
        names = datasets.get_dataset_split_names(hf_path, hf_name, revision=revision)
        return [str(s) for s in names]
    except Exception:  # noqa: BLE001 - only used to improve an error message
        return None


def _open_saved(hf_path: str, split: str, streaming: bool) -> Any:
    import datasets

    try:
        ds = datasets.load_from_disk(str(Path(hf_path).expanduser()))
    except Exception as exc:  # noqa: BLE001 - datasets raises many types; one line for the user
        raise DataError(hf_path, f"cannot load the save_to_disk folder ({_one_line(exc)})") from exc
    if isinstance(ds, datasets.DatasetDict):
        if split not in ds:
            raise _no_split(hf_path, split, list(ds))
        ds = ds[split]
    elif ds.split is not None and str(ds.split) != split:
        # a folder holding one Dataset: read whole unless it records another split name
        raise _no_split(hf_path, split, [str(ds.split)])
    return ds.to_iterable_dataset() if streaming else ds


def _load(
    hf_path: str, hf_name: str | None, split: str, streaming: bool, revision: str | None
) -> Any:
    import datasets

    try:
        return datasets.load_dataset(
            hf_path, hf_name, split=split, streaming=streaming, revision=revision
        )
    except ValueError as exc:
        if "split" in str(exc).lower():
            splits = _split_names(hf_path, hf_name, revision)
            if splits is not None and split not in splits:
                raise _no_split(hf_path, split, splits) from exc
        raise DataError(hf_path, f"load_dataset failed ({_one_line(exc)})") from exc
    except ConnectionError as exc:
        raise DataError(
            hf_path,
            f"not available offline and the hub is unreachable ({_one_line(exc)})",
            hints=(
                "run once with network (unset HF_HUB_OFFLINE) to fill the cache",
                "or point download.hf_path at a local folder (save_to_disk or data files)",
                "or use your own file: --source jsonl --jsonl FILE",
            ),
        ) from exc
    except Exception as exc:  # noqa: BLE001 - datasets raises many types; one line for the user
        raise DataError(hf_path, f"load_dataset failed ({_one_line(exc)})") from exc


def open_dataset(
    hf_path: str,
    hf_name: str | None = None,
    split: str = "train",
    streaming: bool = False,
    revision: str | None = None,
) -> Any:
    """A `datasets.Dataset` (or `IterableDataset` when streaming) for one split."""
    if is_saved_dataset(hf_path):
        return _open_saved(hf_path, split, streaming)
    if looks_local(hf_path) and not Path(hf_path).expanduser().exists():
        raise DataError(hf_path, "no such file or folder")
    return _load(hf_path, hf_name, split, streaming, revision)


def _check_text_column(ds: Any, hf_path: str, text_field: str) -> None:
    """A missing or non-string text column is a recipe mistake: stop with the columns there are."""
    features = getattr(ds, "features", None)
    if features is None:  # streaming without known features: checked per row instead
        return
    if text_field not in features:
        raise DataError(
            hf_path,
            f"no column {text_field!r} (columns: {', '.join(features)}); set download.text_field",
        )
    dtype = getattr(features[text_field], "dtype", None)
    if dtype not in _STRING_TYPES:
        strings = [k for k, f in features.items() if getattr(f, "dtype", None) in _STRING_TYPES]
        raise DataError(
            hf_path,
            f"column {text_field!r} holds {features[text_field]}, not strings "
            f"(string columns: {', '.join(strings) or 'none'}); set download.text_field",
        )


def _batches(ds: Any, cols: list[str], hf_path: str) -> Iterator[Any]:
    """pyarrow Tables of `cols`, BATCH_ROWS rows each, in dataset order."""
    try:
        if getattr(ds, "features", None) is not None:
            ds = ds.select_columns(cols)
        yield from ds.with_format("arrow").iter(batch_size=BATCH_ROWS)
    except Exception as exc:  # noqa: BLE001 - a read error mid-way: one line, not a traceback
        raise DataError(hf_path, f"reading failed ({_one_line(exc)})") from exc


def read_hf(
    hf_path: str,
    hf_name: str | None,
    split: str,
    text_field: str,
    id_field: str | None,
    streaming: bool,
    revision: str | None,
    progress: bool = True,
) -> Iterator[Record | Malformed]:
    """Records of one split in dataset order; ids from `id_field` when the column exists, else
    `<source>:<split>:<row index>` (0-based, as `ds[i]`)."""
    import datasets

    if not progress:
        datasets.disable_progress_bars()
    ds = open_dataset(hf_path, hf_name, split, streaming, revision)
    _check_text_column(ds, hf_path, text_field)
    features = getattr(ds, "features", None)
    has_id = bool(id_field) and (features is None or id_field in features)
    cols = [text_field] + ([id_field] if has_id and id_field != text_field else [])
    source = source_name(hf_path)
    row = 0
    for batch in _batches(ds, cols, hf_path):
        names = batch.column_names
        if text_field not in names:
            raise DataError(
                hf_path,
                f"no column {text_field!r} (columns: {', '.join(names)}); set download.text_field",
            )
        texts = batch.column(text_field).to_pylist()
        ids = batch.column(id_field).to_pylist() if id_field in names else [None] * len(texts)
        for text, doc_id in zip(texts, ids, strict=True):
            yield _record(text, doc_id, row, source, split, hf_path, text_field)
            row += 1


def read_source(cfg: Any, seed: int, progress: bool) -> Iterator[Record | Malformed]:
    """The source reader: `cfg` is the recipe's download block (hf_path, hf_name, split, ...)."""
    return read_hf(
        cfg.hf_path or "",
        cfg.hf_name,
        cfg.split,
        cfg.text_field,
        cfg.id_field,
        cfg.streaming,
        cfg.revision,
        progress,
    )


def _record(
    text: Any, doc_id: Any, row: int, source: str, split: str, hf_path: str, text_field: str
) -> Record | Malformed:
    if not isinstance(text, str):
        return Malformed(
            f"{hf_path}[{split}]:row {row}",
            "text_not_string",
            f"column '{text_field}' is {type(text).__name__}, not a string",
            str(text),
        )
    text, _ = fix_surrogates(text)
    made = f"{source}:{split}:{row}"
    return Record(fix_surrogates(str(doc_id))[0] if doc_id is not None else made, text, source)


def check_config(path: str, hf_path: str | None, split: str, streaming: bool = False) -> None:
    """Recipe-time checks that need no network: hf_path given, a local path exists, no split
    slicing when streaming (an IterableDataset has no row count to slice)."""
    if not hf_path:
        raise RecipeError(
            f"{path}.hf_path",
            "is required when source is 'hf' (a hub name like 'roneneldan/TinyStories', "
            "a local data folder, or a save_to_disk folder)",
        )
    if looks_local(hf_path) and not Path(hf_path).expanduser().exists():
        raise RecipeError(f"{path}.hf_path", f"no file or folder {hf_path!r}")
    if not split:
        raise RecipeError(f"{path}.split", "must name a split, e.g. 'train'")
    if importlib.util.find_spec("datasets") is None:
        raise RecipeError(
            f"{path}.source",
            "'hf' needs the `datasets` package (the `hf` extra): pip install -e '.[hf]'",
        )
    if streaming and "[" in split:
        raise RecipeError(
            f"{path}.split",
            f"slicing ({split!r}) needs streaming: false; when streaming, use "
            f"split: {split.split('[')[0]!r} with download.max_docs",
        )
