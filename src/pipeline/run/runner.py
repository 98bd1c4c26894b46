"""Run a recipe's enabled stages in the fixed order, skipping those already done.

fingerprint = hash(stage config, stage seed, content of the input files the config names,
upstream fingerprint, code version). A stage whose fingerprint matches the manifest and whose
outputs are intact is skipped. Otherwise it runs into `<run>/.tmp-<stage>/`, and `_commit`
makes the result visible: rename into place, then one atomic manifest write holding the
outputs and the report section (the commit point), then the report is rebuilt from the
manifest. A run killed at any instant leaves the old or the new state of each stage; re-run, it
ends with the same bytes (docs/overview.md, "After a crash"). A stage's temp folder survives a
crash: parts finished in it are recorded (pipeline.run.resume) and a re-run with the same
fingerprint redoes only the unfinished ones.

Outputs are read once, by the tasks that write them (their resume markers record the sha256)
or at commit, and their hashes are kept in `<run>/.output_hashes.json` by (path, size, mtime_ns,
inode) (pipeline.run.input_hashes.HashCache): a re-run that skips every stage, and a
`--dry-run`, check the outputs by `stat` and read none of their bytes. A run folder on a URL
goes through the same steps with its UrlStore (pipeline.run.storage); a path's Store is a no-op.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path

from pipeline import __version__
from pipeline.config import RunConfig, config_hash
from pipeline.errors import PipelineError, RecipeError
from pipeline.executor import BaseExecutor, Executor
from pipeline.io import crash_point, iter_files
from pipeline.manifest import MANIFEST_NAME, Manifest, check_stage_folder
from pipeline.parts import num_records
from pipeline.recipe import Recipe
from pipeline.report import REPORT_NAME, check_balance, dropped_total, sync_report
from pipeline.report.html import HTML_NAME, write_html
from pipeline.run.input_hashes import (
    CACHE_NAME,
    OUTPUT_CACHE_NAME,
    HashCache,
    describe_inputs,
    fingerprint_part,
    stamp_of,
)
from pipeline.run.remote import map_sync
from pipeline.run.resume import RESUME_DIR, STAGE_FILE, PartLedger
from pipeline.run.storage import Store, stamp, working_copy
from pipeline.stage import Stage, StageContext, StageInputs
from pipeline.stages import STAGES

log = logging.getLogger("pipeline")


def stage_seed(seed: int, name: str) -> int:
    """A 32-bit seed per stage, a pure function of (recipe seed, stage name)."""
    return int.from_bytes(hashlib.blake2b(f"{seed}:{name}".encode(), digest_size=4).digest(), "big")


def seed_for(stage: Stage, seed: int) -> int:
    """The seed `stage` runs with: derived from (recipe seed, name), or the recipe's own."""
    return seed if stage.seed_scope == "recipe" else stage_seed(seed, stage.name)


def fingerprint(
    name: str, cfg: object, seed: int, upstream: str | None, inputs: list[dict] | None = None
) -> str:
    stage = STAGES[name]
    doc = {
        "stage": name,
        "config": config_hash(cfg),
        "seed": stage_seed(seed, name),  # whatever its seed_scope: the recipe seed decides
        "upstream": upstream,
        "code": f"{__version__}+{stage.version}",
    }
    if inputs:  # absent when the config names no file: fingerprints of such stages unchanged
        doc["inputs"] = fingerprint_part(inputs)
    blob = json.dumps(doc, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:32]


@dataclass
class PlanItem:
    name: str
    fingerprint: str
    action: str  # "run", "skip" (up to date), "reuse" (before --from), "off" (after --until)
    why: str
    inputs: list[dict] = field(default_factory=list)  # files the config names: path, bytes, sha


def select(recipe: Recipe, start: str | None, until: str | None, only: str | None) -> list[str]:
    names = list(recipe.stages)
    for flag, value in (("--from", start), ("--until", until), ("--only", only)):
        if value is not None and value not in names:
            raise RecipeError(
                flag, f"stage '{value}' is not enabled in this recipe; enabled: {', '.join(names)}"
            )
    if only is not None:
        start = until = only
    lo = names.index(start) if start else 0
    hi = names.index(until) if until else len(names) - 1
    if lo > hi:
        raise RecipeError("--from", f"'{start}' comes after --until '{until}'")
    return names[lo : hi + 1]


def plan(
    recipe: Recipe,
    manifest: Manifest,
    start: str | None = None,
    until: str | None = None,
    only: str | None = None,
    force: bool = False,
    save_cache: bool = True,
    hashes: HashCache | None = None,
) -> list[PlanItem]:
    """What each enabled stage does in this run, and why. `hashes`: the run's output hashes
    (default: loaded from the run folder, saved unless `save_cache` is False)."""
    selected = select(recipe, start, until, only)
    items, upstream = [], None
    order = list(STAGES)
    seed = recipe.run.seed
    cache = HashCache(manifest.run_dir / CACHE_NAME)
    if hashes is None:
        hashes = output_hashes(manifest.run_dir, write=save_cache)
    for name, cfg in recipe.stages.items():
        inputs = describe_inputs(cfg, cache)
        fp = fingerprint(name, cfg, seed, upstream, inputs)
        done = manifest.is_done(name, fp, hashes.digests)
        if done and not (force and name in selected):  # --force replaces the folder anyway
            check_stage_folder(manifest, name)  # a stray file is named, not kept or deleted
        if name in selected:
            if force:
                action, why = "run", "forced"
            elif done:
                action, why = "skip", "up to date (fingerprint and output hashes match)"
            else:
                action, why = "run", _why_changed(manifest.stages.get(name), inputs)
        elif order.index(name) < order.index(selected[0]):
            if not done:
                raise PipelineError(
                    f"stage '{name}' has no up-to-date output in "
                    f"{manifest.run_dir}; run it first (drop --from/--only)"
                )
            action, why = "reuse", "before the selected stages"
        else:
            action, why = "off", "after --until"
        items.append(PlanItem(name, fp, action, why, inputs))
        upstream = fp
    if save_cache:
        with contextlib.suppress(OSError):  # a cache: a read-only run folder costs re-hashing
            cache.save()
            hashes.save()
    return items


def output_hashes(run_dir: Path, write: bool = True) -> HashCache:
    """The sha256 of the run's committed outputs, by (path in the run folder, size, mtime_ns,
    inode); `write=False` (a dry run) adds nothing and never writes the file."""
    return HashCache(Path(run_dir) / OUTPUT_CACHE_NAME, root=Path(run_dir), write=write)


def _why_changed(entry: dict | None, inputs: list[dict]) -> str:
    if entry is None:
        return "not run yet"
    before = {i.get("path"): i.get("sha256") for i in entry.get("inputs", [])}
    for i in inputs:
        if i["path"] in before and before[i["path"]] != i["sha256"]:
            return f"changed (input {i['path']} changed)"
    return "changed"


def run_recipe(
    recipe: Recipe,
    start: str | None = None,
    until: str | None = None,
    only: str | None = None,
    force: bool = False,
    dry_run: bool = False,
    progress: bool = True,
) -> list[PlanItem]:
    with working_copy(recipe.run.out_dir, write=not dry_run) as store:
        return _run(recipe, store, start, until, only, force, dry_run, progress)


def _run(
    recipe: Recipe,
    store: Store,
    start: str | None,
    until: str | None,
    only: str | None,
    force: bool,
    dry_run: bool,
    progress: bool,
) -> list[PlanItem]:
    """run_recipe in `store.local`: the run folder, or the working copy of a URL."""
    run_dir = store.local
    if dry_run:
        return plan(recipe, Manifest.load(run_dir), start, until, only, force, save_cache=False)
    _prepare_run_dir(run_dir)
    with _exclusive(run_dir):
        removed = sweep_temps(run_dir)
        manifest = Manifest.load(run_dir)
        hashes = output_hashes(run_dir)
        items = plan(recipe, manifest, start, until, only, force, hashes=hashes)
        store.sweep(removed, [item.name for item in items if item.action == "skip"])
        _sync_report(manifest, store)  # a report lost or damaged by a crash is rebuilt
        try:
            with make_executor(recipe.run, progress=progress) as executor:
                if any(item.action == "run" for item in items):
                    executor.check_shared(store.shared_dir)
                upstream: str | None = None
                for item in items:
                    if item.action == "run":
                        _run_stage(
                            recipe,
                            manifest,
                            item,
                            upstream,
                            executor,
                            progress,
                            force,
                            store,
                            hashes,
                        )
                    elif item.action == "skip":
                        log.info("[%s] skipped: %s", item.name, item.why)
                    if item.action != "off":
                        upstream = item.name
        finally:
            # report.html shows what pipeline_report.json holds, also after a failed or
            # interrupted run (the stages that finished); atomic, never half a page
            if (run_dir / REPORT_NAME).exists():
                _write_html_or_warn(run_dir)
                store.upload_quietly(HTML_NAME)
    return items


def _sync_report(manifest: Manifest, store: Store) -> None:
    before = stamp(manifest.run_dir / REPORT_NAME)
    sync_report(manifest)
    if stamp(manifest.run_dir / REPORT_NAME) != before:
        store.upload(REPORT_NAME)


def _write_html_or_warn(run_dir: Path) -> None:
    """report.html is a view of the committed report: a chart that cannot be drawn must not
    fail (or mask the error of) a run whose outputs and pipeline_report.json are complete."""
    try:
        write_html(run_dir)
    except Exception as exc:  # noqa: BLE001 - any rendering bug; the data is already committed
        log.warning(
            "report.html not written (%s: %s); pipeline_report.json is complete, "
            "`pipeline report %s` shows it",
            type(exc).__name__,
            str(exc)[:200],
            run_dir,
        )


def _prepare_run_dir(run_dir: Path) -> None:
    """The run folder exists and is writable, or one line says why not."""
    for p in (run_dir, *run_dir.parents):
        if p.exists():
            if not p.is_dir():
                raise PipelineError(f"{p}: is a file, not a folder; choose another out_dir")
            break
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise PipelineError(
            f"{run_dir}: cannot create the run folder ({exc.strerror or exc}); "
            "choose another out_dir"
        ) from None
    if not os.access(run_dir, os.W_OK | os.X_OK):
        raise PipelineError(f"{run_dir}: the run folder is not writable; choose another out_dir")


@contextlib.contextmanager
def _exclusive(run_dir: Path) -> Iterator[None]:
    """One `pipeline data` per run folder at a time (an advisory lock the OS drops when the
    process dies, however it dies)."""
    try:
        import fcntl
    except ImportError:  # not POSIX: no lock
        yield
        return
    with open(run_dir / ".lock", "a+") as f:
        try:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            raise PipelineError(
                f"{run_dir}: another `pipeline data` is running in this folder; wait for it "
                "to finish or use another out_dir"
            ) from None
        try:
            yield
        finally:
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)


def sweep_temps(run_dir: Path) -> list[str]:
    """Remove what killed runs left in the run folder: stage temp folders (`.tmp-<stage>`),
    replaced outputs (`.old-<stage>`) and temp files of atomic writes (`.<name>.*.tmp`). The
    run-folder lock makes sure none belongs to a live run. A stage temp folder with a resume
    record stays: its stage resumes from it (PartLedger.open checks the fingerprint and removes
    what no finished part claims). Returns the names removed."""
    removed = []
    for p in sorted(run_dir.iterdir()):
        if p.name.startswith(".tmp-") and (p / RESUME_DIR / STAGE_FILE).is_file():
            continue
        if p.name.startswith((".tmp-", ".old-")) and p.is_dir():
            shutil.rmtree(p, ignore_errors=True)
        elif p.is_file() and p.name.startswith(".") and p.name.endswith(".tmp"):
            p.unlink(missing_ok=True)
        elif p.is_file() and p.name.startswith(".ray-probe-"):  # a probe named before the .tmp
            p.unlink(missing_ok=True)
        else:
            continue
        removed.append(p.name)
    if removed:
        log.info("removed leftovers of an interrupted run: %s", ", ".join(removed))
    return removed


def _run_stage(
    recipe: Recipe,
    manifest: Manifest,
    item: PlanItem,
    upstream: str | None,
    executor: BaseExecutor,
    progress: bool,
    force: bool,
    store: Store,
    hashes: HashCache,
) -> None:
    name, run_dir = item.name, manifest.run_dir
    stage, cfg = STAGES[name], recipe.stages[name]
    if upstream is not None and manifest.num_part_records(upstream) == 0:
        how = store.see(REPORT_NAME, upstream)
        raise PipelineError(f"{name}: nothing to do, {upstream} left no records; {how} for why")
    tmp = run_dir / f".tmp-{name}"
    crash_point(f"{name}: before mkdir {tmp.name}")
    ledger = _open_ledger(tmp, item.fingerprint, force, name, store)
    ctx = StageContext(
        name=name,
        run_dir=run_dir,
        out_dir=tmp,
        seed=seed_for(stage, recipe.run.seed),
        inputs=_inputs(stage, recipe, manifest, upstream),
        upstream=upstream,
        executor=executor,
        progress=progress,
        log=log,
    )
    log.info("[%s] running (%s)", name, item.why)
    t0 = time.perf_counter()
    executor.bind(ledger, map_sync(store, tmp.name, executor.remote_nodes))
    try:
        result = stage.run(cfg, ctx)
    except BaseException:
        executor.abort()  # workers may still be writing into tmp
        done = ledger.finished_on_disk()
        if done:
            log.info(
                "[%s] kept %s: a re-run resumes from its %d finished parts",
                name,
                store.where(tmp.name),
                done,
            )
        else:
            log.info("[%s] stopped before any part finished: a re-run starts it again", name)
        raise
    finally:
        executor.bind(None)
    known = ledger.known_hashes()  # what the tasks hashed as they wrote
    ledger.close()
    if ledger.reused:  # the log only: the manifest and report equal an uninterrupted run's
        log.info("[%s] %d tasks resumed from a crashed run", name, ledger.reused)
    seconds = time.perf_counter() - t0
    outputs = _describe_outputs(name, tmp, result.outputs, hashes, known)
    stats = result.all_stats()
    check_balance(stats)
    if "docs_in" in stats:
        stats["docs_per_s"] = round(stats["docs_in"] / max(seconds, 1e-9), 1)
    if "bytes_in" in stats:
        stats["mb_per_s"] = round(stats["bytes_in"] / 1e6 / max(seconds, 1e-9), 3)
    entry = {
        "fingerprint": item.fingerprint,
        "seed": ctx.seed,
        "upstream": upstream,
        "finished_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "inputs": item.inputs,
        "outputs": outputs,
        "report": {"seconds": round(seconds, 3), "stats": stats},
    }
    report_info = {
        "recipe": {
            "name": recipe.run.name,
            "path": recipe.path,
            "config": recorded_recipe(recipe),
        },
        "seed": recipe.run.seed,
    }
    _commit(manifest, name, tmp, entry, report_info, store, hashes)
    log.info("[%s] done in %.2fs: %s", name, seconds, _summary(stats))


def recorded_recipe(recipe: Recipe) -> dict:
    """The recipe as the report records it: every default filled in, less out_dir, workers and
    executor (where a run goes and what runs its parts never change its bytes, so a run folder
    moved or re-run with more workers or on Ray keeps the same manifest)."""
    skip = ("out_dir", "workers", "executor")
    return {k: v for k, v in recipe.to_dict().items() if k not in skip}


def make_executor(run: RunConfig, progress: bool = False) -> BaseExecutor:
    """The executor a recipe's run keys ask for; Ray is imported only when asked for."""
    if run.executor.kind == "ray":
        from pipeline.run.ray import RayExecutor

        return RayExecutor(run.executor, run.workers, progress)
    return Executor(run.workers, progress)


def _open_ledger(tmp: Path, fingerprint: str, force: bool, name: str, store: Store) -> PartLedger:
    """The stage's temp folder, keeping the parts a crashed run of the same fingerprint
    finished (not under --force: that starts from nothing). On a URL, `.tmp-<stage>/` there
    is made to hold what the working copy keeps, and finished tasks upload into it."""
    ledger = PartLedger.open(tmp, fingerprint, fresh=force, remote=store.ledger_remote)
    store.prune(tmp.name)
    store.upload(f"{tmp.name}/{RESUME_DIR}/{STAGE_FILE}")
    if len(ledger):
        log.info("[%s] resuming: %d finished tasks recorded in %s", name, len(ledger), tmp)
    return ledger


def _commit(
    manifest: Manifest,
    name: str,
    tmp: Path,
    entry: dict,
    report_info: dict | None,
    store: Store,
    hashes: HashCache,
) -> None:
    """Make a finished stage visible. The atomic manifest write is the commit point: before it
    the manifest describes the old outputs (missing or replaced, so the stage re-runs), after it
    the new ones with their report section. Whatever instant a crash hits, the next run sees
    the old or the new state; the report is rebuilt from the manifest either way. On a URL the
    same holds for the manifest PUT (pipeline.run.storage): outputs first, then the manifest, then
    the stale keys and the resume folder go. The outputs' hashes (taken by _describe_outputs,
    under their final paths: a rename keeps size, mtime and inode) are cached last."""
    run_dir = manifest.run_dir
    final, old = run_dir / name, run_dir / f".old-{name}"
    if final.exists():
        shutil.rmtree(old, ignore_errors=True)
        crash_point(f"{name}: before moving the old output aside")
        final.rename(old)
    crash_point(f"{name}: before renaming {tmp.name} into place")
    tmp.rename(final)
    manifest.stages[name] = entry
    if report_info is not None:
        manifest.report = report_info
    store.push_dir(name)  # overwrites keys the old manifest names: it no longer matches
    manifest.save()  # crash points inside: atomic_write_bytes
    store.upload(MANIFEST_NAME)  # the commit on the URL
    crash_point(f"{name}: after the manifest, before removing the old output")
    shutil.rmtree(old, ignore_errors=True)
    store.remove_dir(tmp.name)
    _sync_report(manifest, store)  # crash points inside
    with contextlib.suppress(OSError):  # a cache: unwritable costs one re-hash next run
        hashes.save()


def _inputs(
    stage: Stage, recipe: Recipe, manifest: Manifest, upstream: str | None
) -> dict[str, StageInputs]:
    """What the stage may read: its upstream, its `needs` (enabled: the recipe checked) and
    those of its `uses` that are enabled, each as recorded in the manifest, with the config it
    ran with (the recipe's: an earlier stage is up to date or runs first, `plan`)."""
    names = [upstream] if upstream else []
    names += [n for n in stage.needs + stage.uses if n in recipe.stages and n not in names]
    return {n: replace(manifest.inputs(n), config=recipe.stages[n]) for n in names}


def _describe_outputs(
    name: str,
    tmp: Path,
    declared: list[str],
    hashes: HashCache,
    known: dict[str, tuple[list[int], str]],
) -> list[dict]:
    found = {p.relative_to(tmp).as_posix() for p in iter_files(tmp)}
    missing = sorted(set(declared) - found)
    undeclared = sorted(found - set(declared))
    # stage bugs, not user errors: a stage must declare exactly what it wrote
    assert not missing, f"stage {name} declared outputs it did not write: {missing[:3]}"
    assert not undeclared, f"stage {name} wrote undeclared files: {undeclared[:3]}"
    rels = sorted(declared)
    digests = _output_digests(name, tmp, rels, hashes, known)
    out = []
    for rel, digest in zip(rels, digests, strict=True):
        path = tmp / rel
        out.append(
            {
                "path": f"{name}/{rel}",
                "sha256": digest,
                "records": num_records(path),
                "bytes": path.stat().st_size,
            }
        )
    return out


def _output_digests(
    name: str,
    tmp: Path,
    rels: list[str],
    hashes: HashCache,
    known: dict[str, tuple[list[int], str]],
) -> list[str]:
    """sha256 of each output: the task's own (`known`: stamp, sha256 from its resume marker)
    where the file still has the stamp it had when the task hashed it, else read here. All are
    cached under the paths they are committed to (a rename keeps size, mtime and inode)."""
    got: dict[str, str] = {}
    todo = []
    for rel in rels:
        rec = known.get(rel)
        if rec is not None and stamp_of(tmp / rel) == rec[0]:
            got[rel] = rec[1]
            hashes.put(f"{name}/{rel}", rec[0], rec[1])
        else:  # stage-level files, tasks that are not recorded, a copy pulled from a URL
            todo.append(rel)
    fresh = hashes.hash_new([tmp / rel for rel in todo], [f"{name}/{rel}" for rel in todo])
    got.update(zip(todo, fresh, strict=True))
    return [got[rel] for rel in rels]


def _summary(stats: dict) -> str:
    keys = [k for k in ("docs_in", "docs_out", "tokens_out", "docs_per_s") if k in stats]
    if not keys:  # a stage that counts something else (shard: sequences)
        keys = [k for k, v in stats.items() if isinstance(v, int) and not isinstance(v, bool)][:3]
    dropped = dropped_total(stats)
    text = ", ".join(
        f"{k}={stats[k]:,}" if isinstance(stats[k], int) else f"{k}={stats[k]}" for k in keys
    )
    return text + (f", dropped={dropped:,}" if dropped else "")
