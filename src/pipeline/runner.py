"""Run a recipe's enabled stages in the fixed order, skipping those already done.

fingerprint = hash(stage config, stage seed, upstream fingerprint, code version). A stage whose
fingerprint matches the manifest and whose outputs are intact is skipped. Otherwise it runs into
`<run>/.tmp-<stage>/`, which is renamed into place; then manifest and report are rewritten
atomically. A run killed at any moment, re-run, ends with the same bytes.
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
import time
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path

from pipeline import __version__
from pipeline.config import config_hash
from pipeline.errors import PipelineError, RecipeError
from pipeline.executor import Executor
from pipeline.io import iter_files, num_records, sha256_file
from pipeline.manifest import Manifest
from pipeline.recipe import Recipe
from pipeline.report import check_balance, update_report
from pipeline.stage import Stage, StageContext, StageInputs
from pipeline.stages import STAGES

log = logging.getLogger("pipeline")


def stage_seed(seed: int, name: str) -> int:
    """A 32-bit seed per stage, a pure function of (recipe seed, stage name)."""
    return int.from_bytes(hashlib.blake2b(f"{seed}:{name}".encode(), digest_size=4).digest(), "big")


def seed_for(stage: Stage, seed: int) -> int:
    """The seed `stage` runs with: derived from (recipe seed, name), or the recipe's own."""
    return seed if stage.seed_scope == "recipe" else stage_seed(seed, stage.name)


def fingerprint(name: str, cfg: object, seed: int, upstream: str | None) -> str:
    stage = STAGES[name]
    blob = json.dumps(
        {
            "stage": name,
            "config": config_hash(cfg),
            "seed": stage_seed(seed, name),  # whatever its seed_scope: the recipe seed decides
            "upstream": upstream,
            "code": f"{__version__}+{stage.version}",
        },
        sort_keys=True,
    )
    return hashlib.sha256(blob.encode()).hexdigest()[:32]


@dataclass
class PlanItem:
    name: str
    fingerprint: str
    action: str  # "run", "skip" (up to date), "reuse" (before --from), "off" (after --until)
    why: str


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
) -> list[PlanItem]:
    selected = select(recipe, start, until, only)
    order = list(STAGES)
    items, upstream = [], None
    seed = recipe.run.seed
    for name, cfg in recipe.stages.items():
        fp = fingerprint(name, cfg, seed, upstream)
        done = manifest.is_done(name, fp)
        if name in selected:
            if force:
                action, why = "run", "forced"
            elif done:
                action, why = "skip", "up to date (fingerprint and output hashes match)"
            else:
                action, why = "run", "not run yet" if name not in manifest.stages else "changed"
        elif order.index(name) < order.index(selected[0]):
            if not done:
                raise PipelineError(
                    f"stage '{name}' has no up-to-date output in "
                    f"{manifest.run_dir}; run it first (drop --from/--only)"
                )
            action, why = "reuse", "before the selected stages"
        else:
            action, why = "off", "after --until"
        items.append(PlanItem(name, fp, action, why))
        upstream = fp
    return items


def run_recipe(
    recipe: Recipe,
    start: str | None = None,
    until: str | None = None,
    only: str | None = None,
    force: bool = False,
    dry_run: bool = False,
    progress: bool = True,
) -> list[PlanItem]:
    run_dir = Path(recipe.run.out_dir)
    manifest = Manifest.load(run_dir)
    items = plan(recipe, manifest, start, until, only, force)
    if dry_run:
        return items
    run_dir.mkdir(parents=True, exist_ok=True)
    with Executor(recipe.run.workers, progress=progress) as executor:
        upstream: str | None = None
        for item in items:
            if item.action == "run":
                _run_stage(recipe, manifest, item, upstream, executor, progress)
            elif item.action == "skip":
                log.info("[%s] skipped: %s", item.name, item.why)
            if item.action != "off":
                upstream = item.name
    return items


def _run_stage(
    recipe: Recipe,
    manifest: Manifest,
    item: PlanItem,
    upstream: str | None,
    executor: Executor,
    progress: bool,
) -> None:
    name, run_dir = item.name, manifest.run_dir
    stage, cfg = STAGES[name], recipe.stages[name]
    if upstream is not None and manifest.num_part_records(upstream) == 0:
        raise PipelineError(
            f"{name}: nothing to do, {upstream} left no records; see `pipeline report {run_dir}` "
            f"and `pipeline inspect {run_dir} --stage {upstream}` for why"
        )
    tmp = run_dir / f".tmp-{name}"
    shutil.rmtree(tmp, ignore_errors=True)  # leftovers of an interrupted run
    tmp.mkdir(parents=True)
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
    try:
        result = stage.run(cfg, ctx)
    except BaseException:
        executor.abort()  # workers may still be writing into tmp
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    seconds = time.perf_counter() - t0
    outputs = _describe_outputs(name, tmp, result.outputs)
    final = run_dir / name
    if final.exists():
        old = run_dir / f".old-{name}"
        shutil.rmtree(old, ignore_errors=True)
        final.rename(old)
        tmp.rename(final)
        shutil.rmtree(old, ignore_errors=True)
    else:
        tmp.rename(final)
    stats = dict(result.stats)
    check_balance(stats)
    if "docs_in" in stats:
        stats["docs_per_s"] = round(stats["docs_in"] / max(seconds, 1e-9), 1)
    if "bytes_in" in stats:
        stats["mb_per_s"] = round(stats["bytes_in"] / 1e6 / max(seconds, 1e-9), 3)
    manifest.stages[name] = {
        "fingerprint": item.fingerprint,
        "seed": ctx.seed,
        "upstream": upstream,
        "finished_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "outputs": outputs,
    }
    manifest.save()
    recipe_info = {
        "name": recipe.run.name,
        "path": recipe.path,
        "config": {k: asdict(v) for k, v in recipe.stages.items()},
    }
    update_report(
        run_dir,
        recipe_info,
        recipe.run.seed,
        {"stage": name, "seconds": round(seconds, 3), "stats": stats},
        list(STAGES),
    )
    log.info("[%s] done in %.2fs: %s", name, seconds, _summary(stats))


def _inputs(
    stage: Stage, recipe: Recipe, manifest: Manifest, upstream: str | None
) -> dict[str, StageInputs]:
    """What the stage may read: its upstream, its `needs` (enabled: the recipe checked) and
    those of its `uses` that are enabled, each as recorded in the manifest."""
    names = [upstream] if upstream else []
    names += [n for n in stage.needs + stage.uses if n in recipe.stages and n not in names]
    return {n: manifest.inputs(n) for n in names}


def _describe_outputs(name: str, tmp: Path, declared: list[str]) -> list[dict]:
    found = {p.relative_to(tmp).as_posix() for p in iter_files(tmp)}
    missing = sorted(set(declared) - found)
    undeclared = sorted(found - set(declared))
    # stage bugs, not user errors: a stage must declare exactly what it wrote
    assert not missing, f"stage {name} declared outputs it did not write: {missing[:3]}"
    assert not undeclared, f"stage {name} wrote undeclared files: {undeclared[:3]}"
    out = []
    for rel in sorted(declared):
        path = tmp / rel
        out.append(
            {
                "path": f"{name}/{rel}",
                "sha256": sha256_file(path),
                "records": num_records(path),
                "bytes": path.stat().st_size,
            }
        )
    return out


def _summary(stats: dict) -> str:
    keys = [k for k in ("docs_in", "docs_out", "tokens_out", "docs_per_s") if k in stats]
    if not keys:  # a stage that counts something else (shard: sequences)
        keys = [k for k, v in stats.items() if isinstance(v, int) and not isinstance(v, bool)][:3]
    dropped = sum(v for k, v in stats.items() if k.startswith("dropped_") and isinstance(v, int))
    text = ", ".join(
        f"{k}={stats[k]:,}" if isinstance(stats[k], int) else f"{k}={stats[k]}" for k in keys
    )
    return text + (f", dropped={dropped:,}" if dropped else "")
