"""Command line: `python -m pipeline <command>`; `pipeline <command> -h` for each command's flags.

Errors a user can fix print one line (`error: ...`) and exit 1; `--debug` shows the traceback.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path

# Before numpy loads (pipeline.errors imports none): the pipeline runs one task per worker
# process, so numpy's BLAS gets one thread per process unless the user says otherwise. The
# coherence fit measured 0.19 CPU-s per fit on OpenBLAS's default threads against 0.012 s on one
# (2 shared cores), with the same bytes. torch's own threads (pretrain) are not affected.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from pipeline.errors import PipelineError  # noqa: E402

log = logging.getLogger("pipeline")


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bars, warnings only")
    p.add_argument("--debug", action="store_true", help="show tracebacks")


def _recipe_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", type=Path, help="recipe YAML (without it: the recipes here)")
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="STAGE.KEY=VALUE",
        help="override a recipe value (repeatable), typed like the field",
    )
    p.add_argument("--out-dir", help="run folder (overrides out_dir)")
    p.add_argument("--workers", type=int, help="local worker processes (overrides workers)")
    p.add_argument(
        "--executor",
        choices=("local", "ray"),
        help="where per-part work runs (overrides executor.kind); ray: see docs/scale.md",
    )
    p.add_argument(
        "--source",
        help="shorthand for --set download.source=...; without --config: the "
        "built-in default recipe (`pipeline show --source S` prints it)",
    )
    p.add_argument("--jsonl", help="JSONL file/folder/glob: download.source=jsonl, download.path")
    p.add_argument("--parquet", help="Parquet files: download.source=parquet, download.path")
    p.add_argument("--text", help="text files: download.source=text, download.path")
    p.add_argument("--hf", help="Hugging Face dataset: download.source=hf, download.hf_path")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="pipeline", description="LLM pretraining data preparation"
    )
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("data", help="run a recipe's stages")
    _recipe_args(p)
    p.add_argument("--from", dest="start", metavar="STAGE", help="start at this stage")
    p.add_argument("--until", metavar="STAGE", help="stop after this stage")
    p.add_argument("--only", metavar="STAGE", help="run just this stage")
    p.add_argument("--force", action="store_true", help="re-run selected stages even if up to date")
    p.add_argument("--dry-run", action="store_true", help="print the plan, run nothing")
    _common(p)

    p = sub.add_parser("show", help="print the recipe with every default filled in")
    _recipe_args(p)
    _common(p)

    p = sub.add_parser(
        "report", help="print a run's pipeline_report.json as a table, or compare two runs"
    )
    p.add_argument("run_dirs", nargs="+", type=Path, metavar="RUN_DIR", help="one run, or A B")
    p.add_argument(
        "--json", action="store_true", help="print the raw JSON (A B: the comparison as JSON)"
    )
    p.add_argument("--html", action="store_true", help="write report.html (A B: compare.html)")
    p.add_argument("--all", action="store_true", help="compare: also rows equal in both runs")
    _common(p)

    p = sub.add_parser("datasets", help="list the builtin corpora")
    p.add_argument("--probe", action="store_true", help="ask each server for the remote size")
    _common(p)

    p = sub.add_parser("inspect", help="print rejected documents of a stage")
    p.add_argument("run_dir", type=Path)
    p.add_argument("--stage", required=True)
    p.add_argument("--reason", help="only documents rejected for this reason (rule name)")
    p.add_argument("--cluster", type=int, help="dedup: show this cluster's documents side by side")
    p.add_argument("-n", type=int, default=5, help="how many examples")
    p.add_argument("--chars", type=int, default=300, help="characters of text to show")
    _common(p)

    p = sub.add_parser(
        "export",
        help="a stage's documents or the shards as a datasets folder, JSONL or Parquet, or the "
        "shards for Megatron, Mosaic MDS, nanoGPT or litdata",
    )
    p.add_argument("run_dir", type=Path)
    p.add_argument("out", type=Path, help="new folder to write (see --force)")
    p.add_argument("--stage", help="export this stage's kept documents (all columns)")
    p.add_argument("--shards", action="store_true", help="export shard/ as train/validation")
    p.add_argument(
        "--to",
        required=True,
        choices=["hf", "jsonl", "parquet", "megatron", "mds", "nanogpt", "litdata"],
        help="format (megatron, mds, nanogpt, litdata: a trainer's own, with --shards)",
    )
    p.add_argument("--force", action="store_true", help="replace OUT if it exists")
    _common(p)

    p = sub.add_parser("shuffle", help="rebalance and shuffle existing .npz shards")
    p.add_argument("--input-dir", required=True, type=Path, help="folder of .npz shards")
    p.add_argument("--output-dir", required=True, type=Path, help="new folder (must not exist)")
    p.add_argument("--shard-size", required=True, type=int, help="samples per output shard")
    p.add_argument("--seed", required=True, type=int, help="shuffle seed (>= 0)")
    _common(p)

    p = sub.add_parser("pretrain", help="train the proxy GPT on a run's shards (docs/pretrain.md)")
    p.add_argument("--config", type=Path, required=True, help="pretrain recipe YAML")
    p.add_argument("--run", type=Path, help="data run folder (default: pretrain.run_dir)")
    p.add_argument("--out-dir", type=Path, help="default: <run>/pretrain")
    p.add_argument("--set", action="append", default=[], metavar="pretrain.KEY=VALUE")
    p.add_argument("--resume", action="store_true", help="continue from the checkpoint")
    p.add_argument("--force", action="store_true", help="start over an existing checkpoint")
    _common(p)

    p = sub.add_parser("ablate", help="train the same proxy on several runs, compare BPB")
    p.add_argument("runs", nargs="+", type=Path, metavar="RUN", help="data run folders")
    p.add_argument("--config", type=Path, required=True, help="pretrain recipe YAML")
    p.add_argument("--eval-texts", nargs="+", required=True, metavar="F", help=".jsonl/.txt")
    p.add_argument("--seeds", default=None, help="comma-separated, default: pretrain.seed")
    p.add_argument("--set", action="append", default=[], metavar="pretrain.KEY=VALUE")
    p.add_argument("--out-dir", type=Path, default=Path("outputs/ablate"), help="results")
    _common(p)

    p = sub.add_parser("bench", help="measure loader throughput on a shard folder")
    p.add_argument(
        "--shards",
        required=True,
        help="shard folder (train/ or eval/), or `env`: the folder TRAIN_DATA_PATH names",
    )
    p.add_argument(
        "--preset",
        default="none",
        choices=["none", "cache", "augment", "baseline", "baseline_plus"],
        help="none: no cache, no transforms; cache: opt cache of 512 batches; "
        "augment: baseline_plus (cache + crop, mask, segment dropout)",
    )
    p.add_argument("--order", default="global", choices=["global", "sequential", "shard_block"])
    p.add_argument("--batch-size", type=int, default=32, help="samples per batch")
    p.add_argument("--workers", type=int, default=0, help="DataLoader workers (0: in-process)")
    p.add_argument("--steps", type=int, default=200, help="batches to deliver")
    p.add_argument("--seed", type=int, default=0, help="sampler seed")
    p.add_argument("--step-ms", type=float, default=0.0, help="simulated training step per batch")
    p.add_argument(
        "--max-open-shards", type=int, help="shard maps kept open (default: all, fd-bounded)"
    )
    p.add_argument(
        "--steps-per-sweep",
        type=int,
        default=0,
        help="> 0: StepDataset steps (with replacement, the same each sweep) instead of --order",
    )
    p.add_argument(
        "--cache-policy",
        choices=["none", "lru", "fifo", "lfu", "rr", "opt"],
        help="override the preset's cache policy",
    )
    p.add_argument("--cache-batches", type=int, help="override the preset's cache size (batches)")
    p.add_argument(
        "--out-dir", type=Path, default=Path("outputs/benchmarks"), help="where the JSON goes"
    )
    _common(p)
    return parser


# --jsonl/--parquet/--text/--hf: the source each selects and the download field it sets
PATH_FLAGS = {"jsonl": "path", "parquet": "path", "text": "path", "hf": "hf_path"}


def _source_overrides(args: argparse.Namespace) -> list[str]:
    """`--source S` and one path flag as --set overrides (the flag implies its source)."""
    given = [(src, getattr(args, src)) for src in PATH_FLAGS if getattr(args, src, None)]
    if len(given) > 1:
        flags = " and ".join(f"--{src}" for src, _ in given)
        raise PipelineError(f"{flags}: give one input (each selects its own download.source)")
    out = []
    if given:
        src, value = given[0]
        if args.source and args.source != src:
            raise PipelineError(
                f"--source {args.source} with --{src}: --{src} reads source {src}; "
                f"drop --source or use --source {src}"
            )
        quoted = "'" + value.replace("'", "''") + "'"  # a YAML string, whatever the path holds
        out += [f"download.source={src}", f"download.{PATH_FLAGS[src]}={quoted}"]
    elif args.source:
        out.append(f"download.source={args.source}")
    return out


def _load(args: argparse.Namespace):
    from pipeline.recipe import load_recipe, no_config_message

    source = _source_overrides(args)
    if args.config is None and not source:
        raise PipelineError(no_config_message(Path("recipes")))
    overrides = list(args.set) + source  # without --config: the built-in default recipe
    if args.out_dir:
        overrides.append(f"out_dir={args.out_dir}")
    if args.workers is not None:
        overrides.append(f"workers={args.workers}")
    if args.executor is not None:
        overrides.append(f"executor.kind={args.executor}")
    return load_recipe(args.config, overrides)


def cmd_data(args: argparse.Namespace) -> int:
    from pipeline.run.runner import run_recipe
    from pipeline.run.storage import join_url

    recipe = _load(args)
    items = run_recipe(
        recipe, args.start, args.until, args.only, args.force, args.dry_run, progress=not args.quiet
    )
    if args.dry_run:
        print(f"plan for {recipe.run.out_dir}:")
        for it in items:
            print(f"  {it.name:<9} {it.action:<6} {it.why}")
    else:
        print(join_url(recipe.run.out_dir, "pipeline_report.json"))
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    from pipeline.recipe import dump_recipe

    sys.stdout.write(dump_recipe(_load(args)))
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    import json

    from pipeline.report import format_report, read_run_report

    if len(args.run_dirs) > 2:
        raise PipelineError("report: give one run folder, or two (A B) to compare them")
    if len(args.run_dirs) == 2:
        from pipeline.report.compare import write_compare

        print(write_compare(*args.run_dirs, args.html, args.all, as_json=args.json))
        return 0
    (run_dir,) = args.run_dirs
    report = read_run_report(run_dir)
    if args.html:
        from pipeline.report.html import write_html

        print(write_html(run_dir))
    else:
        print(json.dumps(report, indent=2) if args.json else format_report(report))
    return 0


def cmd_datasets(args: argparse.Namespace) -> int:
    from pipeline.sources import SOURCES, source_names
    from pipeline.sources.builtin import probe

    if args.probe:
        rows = probe()
        width = max(len(size) for _, size, _ in rows)
        for name, size, about in rows:
            print(f"{name:<18} {size:<{width}}  {about}")
    else:
        for name in source_names("remote"):
            print(f"{name:<18} {SOURCES[name].about}")
        offline, files = ", ".join(source_names("offline")), ", ".join(source_names("files"))
        print(f"offline: {offline}; files: {files}")
    return 0


def cmd_inspect(args: argparse.Namespace) -> int:
    from pipeline.inspect import inspect_cluster, inspect_rejected

    if args.cluster is not None:
        print(inspect_cluster(args.run_dir, args.stage, args.cluster, args.chars))
        return 0
    print(inspect_rejected(args.run_dir, args.stage, args.reason, args.n, args.chars))
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from pipeline.export import export

    done = export(
        args.run_dir, args.out, args.to, args.stage, args.shards, args.force, not args.quiet
    )
    print(done.summary())
    return 0


def cmd_shuffle(args: argparse.Namespace) -> int:
    from pipeline.rebalance import shuffle_shards

    meta = shuffle_shards(args.input_dir, args.output_dir, args.shard_size, args.seed)
    q = meta["shuffle_stats"]
    print(
        f"{args.output_dir}: {meta['num_samples']:,} samples in {meta['num_shards']} shards; "
        f"spearman {q['spearman']:+.4f}, same-source ratio {q['same_source_ratio']:.3f}, "
        f"max share deviation {q['max_share_deviation_samples']:.1f} samples"
    )
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    from pipeline.loader.bench import (
        BenchConfig,
        environment,
        format_table,
        run_bench,
        write_result,
    )

    shards = str(args.shards)
    if shards == "env":
        from pipeline.loader.env import data_path

        try:
            shards = data_path("train")
        except ValueError as exc:
            raise PipelineError(f"bench --shards env: {exc}") from None
    cfg = BenchConfig(
        shards=shards,
        preset=args.preset,
        order=args.order,
        batch_size=args.batch_size,
        workers=args.workers,
        steps=args.steps,
        seed=args.seed,
        step_ms=args.step_ms,
        max_open_shards=args.max_open_shards,
        steps_per_sweep=args.steps_per_sweep,
        cache_policy=args.cache_policy,
        cache_batches=args.cache_batches,
    )
    try:
        result = run_bench(cfg, progress=not args.quiet)
    except ValueError as exc:
        raise PipelineError(f"bench: {exc}") from None
    result.update(environment([sys.executable, "-m", "pipeline", *args.argv]))
    name = f"bench_{args.preset}_{args.order}_b{args.batch_size}_w{args.workers}"
    path = write_result(result, args.out_dir, name)
    print(format_table(result))
    print(path)
    return 0


def cmd_pretrain(args: argparse.Namespace) -> int:
    from pipeline.train.cli import run_pretrain

    if text := run_pretrain(args):  # empty on ranks > 0 under torchrun
        print(text)
    return 0


def cmd_ablate(args: argparse.Namespace) -> int:
    from pipeline.train.cli import run_ablate

    print(run_ablate(args))
    return 0


MAX_ERROR_CHARS = 500
MAX_HINT_CHARS = 2000  # a hint is what to do: paths and URLs in it are kept whole


def _one_line(text: str, limit: int = MAX_ERROR_CHARS) -> str:
    """The error as one line of bounded length, whatever a message quotes."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


COMMANDS = {
    "data": cmd_data,
    "show": cmd_show,
    "report": cmd_report,
    "datasets": cmd_datasets,
    "inspect": cmd_inspect,
    "shuffle": cmd_shuffle,
    "export": cmd_export,
    "bench": cmd_bench,
    "pretrain": cmd_pretrain,
    "ablate": cmd_ablate,
}


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)
    logging.basicConfig(
        level=logging.WARNING if args.quiet else logging.INFO,
        format="%(message)s",
        stream=sys.stderr,
        force=True,
    )
    try:
        return COMMANDS[args.command](args)
    except PipelineError as exc:
        if args.debug:
            raise
        print(f"error: {_one_line(str(exc))}", file=sys.stderr)
        for hint in getattr(exc, "hints", ()):  # every hint whole: each on its own line
            print(f"  {_one_line(hint, MAX_HINT_CHARS)}", file=sys.stderr)
        return 1
    except BrokenPipeError:  # `pipeline report ... | head`: the reader left, not an error
        sys.stdout = open(os.devnull, "w")
        return 0
    except OSError as exc:  # the disk said no (read-only, full, a file where a folder goes)
        if args.debug:
            raise
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"error: {_one_line(where + (exc.strerror or str(exc)))}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted; re-run the same command to continue", file=sys.stderr)
        return 130
