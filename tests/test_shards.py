"""The one .npy header reader (pipeline.shards.read_members) and what every shard reader does
with a member it cannot trust (issue 28, defects 6, 8 and 13).

Which numpy writes which header version (numpy.lib.format, unchanged from 1.17 through 2.x, so
for every numpy pyproject allows: >= 1.24, tested here with the installed one and by hand with
1.24.4): `write_array` / `np.save` write 1.0 when the header fits in 65535 bytes and is latin-1,
2.0 when it is longer (a very wide structured dtype), 3.0 when it needs utf-8 (a structured
dtype with non-latin-1 field names); `write_array(..., version=(v, 0))` forces any of the three.
These tests build each version with `np.lib.format.write_array`, so the reader is checked
against the bytes numpy itself writes, plus a corrupt version byte and lying headers.
"""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

import numpy as np
import pytest

from loader.conftest import write_shards
from pipeline.errors import DataError
from pipeline.loader import ShardedTokenDataset
from pipeline.shards import npz_fields, npz_member, parse_npy_header, read_members


def npy_bytes(arr: np.ndarray, version: tuple[int, int] | None) -> bytes:
    buf = io.BytesIO()
    np.lib.format.write_array(buf, arr, version=version, allow_pickle=True)
    return buf.getvalue()


def write_npz(path: Path, members: dict[str, bytes], compressed: bool = False) -> Path:
    how = zipfile.ZIP_DEFLATED if compressed else zipfile.ZIP_STORED
    with zipfile.ZipFile(path, "w", how) as zf:
        for name, data in members.items():
            zf.writestr(f"{name}.npy", data)
    return path


@pytest.mark.filterwarnings("ignore:Stored array in format 3.0")
@pytest.mark.parametrize("version", [(1, 0), (2, 0), (3, 0), None])
@pytest.mark.parametrize("compressed", [False, True])
def test_every_header_version_numpy_writes_is_read(tmp_path, version, compressed):
    arr = np.arange(24, dtype=np.uint16).reshape(4, 6)
    path = write_npz(tmp_path / "a.npz", {"input_ids": npy_bytes(arr, version)}, compressed)
    m = read_members(path)["input_ids"]
    assert (m.shape, m.dtype, m.fortran, m.stored) == (
        (4, 6),
        np.dtype("<u2"),
        False,
        not compressed,
    )
    np.testing.assert_array_equal(npz_member(path, "input_ids"), arr)
    np.testing.assert_array_equal(np.load(path)["input_ids"], arr)  # numpy agrees


@pytest.mark.filterwarnings("ignore:Stored array in format 3.0")
def test_version_3_header_with_utf8_field_names_and_fortran_order(tmp_path):
    """What numpy writes as 3.0 on its own: a header that needs utf-8."""
    arr = np.zeros((3, 2), dtype=[("токен", "<u4")])
    data = npy_bytes(arr, None)
    assert data[6:8] == b"\x03\x00"
    shape, fortran, dtype, head = parse_npy_header(io.BytesIO(data))
    assert (shape, fortran, dtype, head + arr.nbytes) == ((3, 2), False, arr.dtype, len(data))
    f = np.asfortranarray(np.arange(6, dtype=np.int32).reshape(2, 3))
    path = write_npz(tmp_path / "f.npz", {"x": npy_bytes(f, (3, 0))})
    np.testing.assert_array_equal(npz_member(path, "x"), f)


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda b: b[:6] + b"\x04\x00" + b[8:], r"\.npy format version 4\.0, expected 1\.0"),
        (lambda b: b[:6] + b"\x01\x07" + b[8:], r"\.npy format version 1\.7, expected"),
        (lambda b: b"\x93NUMPX" + b[6:], r"bad magic"),
        (lambda b: b[:8] + b"\xff\xff" + b[10:], r"truncated header"),
        (lambda b: b[:10] + b"{'descr': '|O', 'fortran_order': False, 'shape': (2,), }", r"."),
        (lambda b: b[:10] + b"[" * 60 + b[70:], r"not a Python dict literal"),
        (lambda b: b[:5], r"truncated magic"),
    ],
)
def test_corrupt_headers_are_one_data_error(tmp_path, mutate, message):
    """The corrupt version byte used to reach np.lib.format._read_array_header: AttributeError
    on numpy versions without it."""
    data = mutate(npy_bytes(np.arange(8, dtype=np.uint16).reshape(2, 4), (1, 0)))
    path = write_npz(tmp_path / "bad.npz", {"input_ids": data})
    with pytest.raises(DataError, match=rf"bad\.npz: not a readable \.npz shard \(.*{message}"):
        read_members(path)
    with pytest.raises(DataError, match=message):
        npz_fields(path)


def test_a_header_claiming_more_rows_than_the_member_holds(tmp_path):
    """The issue's case: the dataset opened, then get_batch raised 'buffer is too small'."""
    folder = write_shards(tmp_path / "train", [4], seq_len=8)
    shard = folder / "shard_000000.npz"
    arrays = dict(np.load(shard))
    lying = npy_bytes(arrays["input_ids"], (1, 0)).replace(b"(4, 8)", b"(9, 8)")
    write_npz(shard, {"input_ids": lying, "segment_ids": npy_bytes(arrays["segment_ids"], None)})
    meta = json.loads((folder / "metadata.json").read_text())
    meta["shards"][0]["num_samples"] = meta["num_samples"] = meta["shard_sizes"][0] = 9
    (folder / "metadata.json").write_text(json.dumps(meta))
    want = r"input_ids\.npy's header says \[9, 8\] uint16 \(144 bytes\), the member holds 64"
    with pytest.raises(DataError, match=want):
        ShardedTokenDataset(folder)
    with pytest.raises(DataError, match=want):
        npz_member(shard, "input_ids")


def test_a_stored_member_past_the_end_of_the_file(tmp_path):
    path = write_npz(tmp_path / "a.npz", {"x": npy_bytes(np.zeros((64, 8), np.uint16), None)})
    data = bytearray(path.read_bytes())
    info = zipfile.ZipFile(path).getinfo("x.npy")
    # move the central directory's size field of x.npy up: the member now "ends" past EOF
    cd = data.rfind(b"PK\x01\x02")
    data[cd + 20 : cd + 28] = (info.compress_size + 4096).to_bytes(4, "little") * 2
    path.write_bytes(bytes(data))
    with pytest.raises(DataError, match="a.npz: not a readable .npz shard"):
        read_members(path)


def test_a_compressed_object_array_is_refused_by_every_reader(tmp_path, capsys):
    """The issue's case: shuffle and `export --shards` gave a traceback (nothing unpickled)."""
    from pipeline.cli import main

    folder = write_shards(tmp_path / "run" / "shard" / "train", [4], seq_len=8)
    objects = np.array([[1, "x"]] * 4, dtype=object)
    np.savez_compressed(folder / "shard_000000.npz", input_ids=objects, segment_ids=objects)
    for reader in (npz_fields, lambda p: npz_member(p, "input_ids"), read_members):
        with pytest.raises(DataError, match="holds Python objects .would need pickle."):
            reader(folder / "shard_000000.npz")
    with pytest.raises(DataError, match="holds Python objects"):
        ShardedTokenDataset(folder)
    out = tmp_path / "out"
    args = ["--input-dir", str(folder), "--output-dir", str(out), "--shard-size", "2"]
    capsys.readouterr()
    assert main(["shuffle", *args, "--seed", "1", "-q"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "holds Python objects" in err[0], err
    from pipeline.export import export

    with pytest.raises(DataError, match="holds Python objects"):
        export(tmp_path / "run", tmp_path / "exported", "jsonl", shards=True, progress=False)
    assert not (tmp_path / "exported").exists()
