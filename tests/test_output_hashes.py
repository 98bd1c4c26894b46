"""Output hashes: taken once at commit and cached by (path, size, mtime_ns, inode), so a re-run
that skips every stage, and a --dry-run, read no output bytes; a changed output is re-read and
re-runs its stage, whichever of size, mtime or inode tells."""

from __future__ import annotations

import builtins
import json
import os
from pathlib import Path

import pytest

import pipeline.stages as stages_mod
from fake_stages import LOWER
from fake_stages import run as lower_run
from helpers import make_recipe
from pipeline import io
from pipeline.run.input_hashes import OUTPUT_CACHE_NAME, HashCache
from pipeline.run.runner import run_recipe
from pipeline.stage import Stage

STAGES = {"download": {"source": "toy", "max_docs": 90, "docs_per_part": 30}, "clean": {}}
OUTPUT_DIRS = ("download", "clean")


@pytest.fixture(autouse=True)
def fake_clean(monkeypatch):
    monkeypatch.setitem(stages_mod.STAGES, "clean", LOWER)


@pytest.fixture
def reads(monkeypatch, tmp_path):
    """Every output file hashed, and every output file opened from Python, by path."""
    hashed: list[Path] = []
    opened: list[Path] = []
    real_hash, real_open = io.sha256_file, builtins.open

    def counting_hash(path, *a, **kw):
        hashed.append(Path(path))
        return real_hash(path, *a, **kw)

    def counting_open(file, *a, **kw):
        if isinstance(file, (str, os.PathLike)):
            p = Path(file)
            if p.is_relative_to(tmp_path / "run") and p.parent.name in OUTPUT_DIRS:
                opened.append(p)
        return real_open(file, *a, **kw)

    monkeypatch.setattr(io, "sha256_file", counting_hash)
    monkeypatch.setattr(builtins, "open", counting_open)
    return hashed, opened


def actions(items):
    return {i.name: i.action for i in items}


def test_noop_rerun_and_dry_run_read_no_output_bytes(tmp_path, reads):
    hashed, opened = reads
    recipe = make_recipe(tmp_path / "run", STAGES)
    run_recipe(recipe, progress=False)
    assert len(hashed) == 6  # 3 download + 3 clean parts, once each: by the task that wrote it
    assert (tmp_path / "run" / OUTPUT_CACHE_NAME).is_file()
    hashed.clear()
    opened.clear()
    assert actions(run_recipe(recipe, progress=False)) == {"download": "skip", "clean": "skip"}
    assert actions(run_recipe(recipe, dry_run=True, progress=False))["clean"] == "skip"
    assert hashed == [] and opened == []


def _part(tmp_path: Path) -> Path:
    return tmp_path / "run" / "clean" / "part-00001.parquet"


def _flip_last_byte(data: bytes) -> bytes:
    return data[:-1] + bytes([data[-1] ^ 0xFF])


def test_output_rewritten_in_place_is_rehashed_and_reruns(tmp_path, reads):
    """Same size, same inode: the mtime alone tells (the commit cached it only once the
    filesystem clock had passed it, so a write after the commit always shows)."""
    hashed, _ = reads
    recipe = make_recipe(tmp_path / "run", STAGES)
    run_recipe(recipe, progress=False)
    part = _part(tmp_path)
    ino, data = part.stat().st_ino, part.read_bytes()
    with open(part, "r+b") as f:  # in place: same inode, same size
        f.write(_flip_last_byte(data))
    assert part.stat().st_ino == ino
    hashed.clear()
    assert actions(run_recipe(recipe, progress=False)) == {"download": "skip", "clean": "run"}
    assert part in hashed  # read because its stamp changed; the other clean parts were not
    assert not {tmp_path / "run" / "clean" / f"part-0000{i}.parquet" for i in (0, 2)} & set(hashed)
    assert part.read_bytes() == data


def test_output_replaced_with_old_size_and_mtime_is_detected_by_inode(tmp_path, reads):
    hashed, _ = reads
    recipe = make_recipe(tmp_path / "run", STAGES)
    run_recipe(recipe, progress=False)
    part = _part(tmp_path)
    st, data = part.stat(), part.read_bytes()
    new = part.with_name("replacement")
    new.write_bytes(_flip_last_byte(data))
    os.utime(new, ns=(st.st_atime_ns, st.st_mtime_ns))
    os.replace(new, part)  # same size and mtime, another inode
    assert (part.stat().st_size, part.stat().st_mtime_ns) == (st.st_size, st.st_mtime_ns)
    hashed.clear()
    assert actions(run_recipe(recipe, progress=False)) == {"download": "skip", "clean": "run"}
    assert part in hashed


def test_touched_output_is_read_once_then_cached_again(tmp_path, reads):
    hashed, _ = reads
    recipe = make_recipe(tmp_path / "run", STAGES)
    run_recipe(recipe, progress=False)
    part = _part(tmp_path)
    os.utime(part, ns=(10**18, 10**18 - 5 * 10**9))  # same bytes, an older-than-now mtime
    hashed.clear()
    assert actions(run_recipe(recipe, progress=False))["clean"] == "skip"
    assert hashed == [part]
    hashed.clear()
    run_recipe(recipe, progress=False)
    assert hashed == []


def test_damaged_cache_costs_one_read_of_each_output(tmp_path, reads):
    hashed, _ = reads
    recipe = make_recipe(tmp_path / "run", STAGES)
    run_recipe(recipe, progress=False)
    (tmp_path / "run" / OUTPUT_CACHE_NAME).write_text("{not json")
    hashed.clear()
    assert actions(run_recipe(recipe, progress=False)) == {"download": "skip", "clean": "skip"}
    assert len(hashed) == 6
    hashed.clear()
    run_recipe(recipe, progress=False)
    assert hashed == []


def test_dry_run_writes_no_cache(tmp_path, reads):
    recipe = make_recipe(tmp_path / "run", STAGES)
    run_recipe(recipe, progress=False)
    cache = tmp_path / "run" / OUTPUT_CACHE_NAME
    cache.unlink()
    assert actions(run_recipe(recipe, dry_run=True, progress=False))["clean"] == "skip"
    assert not cache.exists()


def test_a_file_stamped_at_or_after_the_filesystem_clock_is_never_cached(tmp_path, monkeypatch):
    """Racy stamps (git's 'racily clean'): a file whose mtime is not older than the clock taken
    before its stat may be written again within the same tick without a new mtime."""
    import pipeline.run.input_hashes as inputs_mod

    monkeypatch.setattr(inputs_mod, "TICK_TRIES", 2)
    old, future = tmp_path / "old.bin", tmp_path / "future.bin"
    old.write_bytes(b"a" * 10)
    future.write_bytes(b"b" * 10)
    os.utime(old, ns=(1, 10**9))
    os.utime(future, ns=(1, 2**62))  # year 2116: always at or after the clock
    cache = HashCache(tmp_path / "cache.json", root=tmp_path)
    assert cache.hash_new([old, future]) == [io.sha256_file(old), io.sha256_file(future)]
    assert set(cache.entries) == {"old.bin"}
    readonly = HashCache(tmp_path / "cache.json", root=tmp_path, write=False)  # a dry run's
    assert readonly.hash_new([old]) == [io.sha256_file(old)]
    assert readonly.entries == {}


def _lower_then_edit(cfg, ctx):
    """The fake clean stage, whose driver code then rewrites part 1 after its task hashed it."""
    result = lower_run(cfg, ctx)
    part = ctx.out_dir / "part-00001.parquet"
    with open(part, "r+b") as f:  # a data byte (not the footer: the commit counts rows)
        f.seek(10)
        byte = f.read(1)
        f.seek(10)
        f.write(bytes([byte[0] ^ 0xFF]))
    return result


def test_commit_takes_the_tasks_hashes_and_rereads_what_changed_since(tmp_path, monkeypatch):
    hashed: list[Path] = []
    real = io.sha256_file
    monkeypatch.setattr(io, "sha256_file", lambda p, *a: hashed.append(Path(p)) or real(p, *a))
    editing = Stage("clean", LOWER.config_cls, _lower_then_edit)
    monkeypatch.setitem(stages_mod.STAGES, "clean", editing)
    run_recipe(make_recipe(tmp_path / "run", STAGES), progress=False)
    tmp = tmp_path / "run" / ".tmp-clean"
    # each task hashed its part once; the commit read again only the part edited after that
    assert sorted(p.name for p in hashed if p.parent == tmp) == [
        "part-00000.parquet",
        "part-00001.parquet",
        "part-00001.parquet",
        "part-00002.parquet",
    ]
    outputs = json.loads((tmp_path / "run" / "manifest.json").read_text())["stages"]["clean"]
    shas = {o["path"]: o["sha256"] for o in outputs["outputs"]}
    part = _part(tmp_path)
    assert shas["clean/part-00001.parquet"] == real(part)  # the bytes on disk, not the task's
