"""Issue 23's proof by training: the data recipe before and after the issue, compared by what
a proxy model learns from each, in bits per byte on held-out real text of every source.

1. A mix from /work/shared/corpora: English (Reuters, TinyStories, WikiText, C4, CCNet-head web,
   Shakespeare pages), Russian (TinyStories-ru) and Chinese (CMRC Wikipedia passages, hotel
   reviews). Per source 12% of the documents (a seeded hash of the text) are held out as that
   source's eval texts, never trained on.
2. Into the training part inject duplicates (every 4th document by hash repeated 1-3 times
   exactly plus one near copy) and junk: one document per three real ones, made from a real
   document of the same source by bench_quality_real's generators (word salad, shuffled words,
   every other word, order-1 and order-2 Markov walks, cross-document splices, half salad,
   keyword spam, boilerplate), kinds in rotation.
3. Data runs on the same mix with recipes/data_demo.yaml's clean, dedup, quality, tokenize,
   pack and shard blocks: `before` with the code and recipe of commit 9311ba7 (before issue 23:
   clean v1, the old coherence), and with this checkout's code and recipe `after` (the mix as
   its filters leave it) and `after_shares` (the mix stated: the same rows read as one
   download.sources entry per source, so each document's `source` is its corpus, and
   shard.source_weights = before's share of the tokens reaching pack per source, with
   shard.source_shortfall: shrink). 9311ba7 cannot state a mix (its jsonl reader gives every
   document of a file one source), so after_shares is "after at before's shares": it isolates
   what the filters keep of each source from how much of each source reaches training.
4. `pipeline ablate before after after_shares` (this checkout) at one token budget, 2+ seeds,
   eval texts one file per source.

    python benchmarks/ablate_quality.py --before-src CHECKOUT_AT_9311ba7/src --seeds 0,1,2
        --set pretrain.max_steps=200      (one command line; cells already trained are reused)

5. Optional `--variant NAME` (repeatable; VARIANTS): one side's code and recipe (before or
   after, as_filtered) on the mix less some injected junk rows (mix_<NAME>.jsonl: the same rows
   in the same order, those dropped), trained in the same ablation after the other runs and
   judged against that side's run on the full mix (summary "variant_verdicts"). A diagnostic:
   what of a gap between before and after the junk each one keeps explains. `before_reorder` /
   `after_reorder` (REORDERS): that side's data run as it is, its train sequences in another
   order, so the same proxy seeds draw other sequences: a null comparison (same data) that
   checks the noise bound, and a second set of draws of each side.

Writes outputs/benchmarks/ablate_quality.json (the ablation's rows, the mix's counts, and each
run's kept documents per source).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

import bench_quality_real as bqr  # noqa: E402
from bench_quality import load_real  # noqa: E402

JUNK = (
    "word_salad",
    "shuffled",
    "every_other_word",
    "markov_bigram",
    "markov_trigram",
    "cross_splice",
    "spliced_salad",
    "keyword_spam",
    "boilerplate",
)
OTHER_LANG = bqr.OTHER_LANG_JUNK
HELD_OUT = 0.12
EVAL_MAX_CHARS = 3000  # per eval document: the eval stays a small share of each training


def _junk_kind(row_id: str) -> str | None:
    """The junk kind of an injected junk row (`<source>/junk<i>:<kind>`), None for the others."""
    rest = row_id.split("/", 1)[1]
    return rest.rsplit(":", 1)[1] if rest.startswith("junk") else None


def _is_markov(row_id: str) -> bool:
    return (_junk_kind(row_id) or "").startswith("markov_")


# --variant NAME: (side, rows to drop from the mix, what it isolates). Each side is the code and
# recipe of that run (before: 9311ba7; after: this checkout, the mix as its filters leave it).
VARIANTS = {
    "before_no_ru_junk": (
        "before",
        lambda i: i.startswith("ru_tinystories/") and _junk_kind(i) is not None,
        "before without the Russian junk rows (what before's kept Russian junk does)",
    ),
    "after_no_en_zh_markov": (
        "after",
        lambda i: not i.startswith("ru_tinystories/") and _is_markov(i),
        "after without the English and Chinese markov_* junk rows (what the Markov junk after "
        "keeps of the other sources does)",
    ),
    "after_no_markov": (
        "after",
        _is_markov,
        "after without every markov_* junk row (Russian ones too)",
    ),
    "before_no_junk": ("before", lambda i: _junk_kind(i) is not None, "before, no junk rows"),
    "after_no_junk": ("after", lambda i: _junk_kind(i) is not None, "after, no junk rows"),
}


# --variant NAME: (side, seed) for the reorder variants: that side's data run as it is (same
# documents, same sequences, same tokenizer), the train sequences in another order. The proxy
# (order: global) draws its 400 sequences per seed from the shard order, so the same seeds read
# other draws: a null comparison (same data, four more draws) that checks the seeds' noise bound.
REORDERS = {
    "before_reorder": ("before", 1, "before's data run, train sequences in another order"),
    "after_reorder": ("after", 1, "after's data run, train sequences in another order"),
}


def reorder_run(out: Path, name: str) -> Path:
    """<out>/<name>: a copy of the side's data run whose shard/train holds the same sequences in
    the order of a numpy permutation (REORDERS' seed); the shard sizes kept, sha256 redone."""
    import shutil

    from pipeline.hashing import sha256_file

    side, seed, _ = REORDERS[name]
    dst = out / name
    src_meta = json.loads((out / side / "shard" / "train" / "metadata.json").read_text())
    src_shas = [e["sha256"] for e in src_meta["shards"]]
    done = dst / "shard" / "train" / "metadata.json"
    if done.is_file() and json.loads(done.read_text()).get("reordered_from") == src_shas:
        return dst  # already made from these shards (npz bytes carry a time: not remade)
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(out / side, dst)
    train = dst / "shard" / "train"
    meta = json.loads((train / "metadata.json").read_text())
    arrays = [np.load(train / e["file"]) for e in meta["shards"]]
    fields = {k: np.concatenate([a[k] for a in arrays]) for k in arrays[0].files}
    order = np.random.default_rng(seed).permutation(meta["num_samples"])
    start = 0
    for e in meta["shards"]:
        n = e["num_samples"]
        rows = order[start : start + n]
        np.savez(train / e["file"], **{k: v[rows] for k, v in fields.items()})
        e["sha256"] = sha256_file(train / e["file"])
        start += n
    meta["reordered_seed"], meta["reordered_from"] = seed, src_shas
    (train / "metadata.json").write_text(json.dumps(meta, indent=2))
    return dst


def variant_mix(out: Path, name: str) -> tuple[Path, dict[str, int]]:
    """mix_<name>.jsonl: mix.jsonl less the rows the variant drops (order kept); the dropped
    rows per source."""
    drop = VARIANTS[name][1]
    dropped: dict[str, int] = {}
    path = out / f"mix_{name}.jsonl"
    with open(out / "mix.jsonl", encoding="utf-8") as f, open(path, "w", encoding="utf-8") as g:
        for line in f:
            row_id = json.loads(line)["id"]
            if drop(row_id):
                src = row_id.split("/", 1)[0]
                dropped[src] = dropped.get(src, 0) + 1
            else:
                g.write(line)
    return path, dict(sorted(dropped.items()))


def bucket(text: str, salt: str) -> float:
    h = hashlib.sha256(f"{salt}:{text}".encode()).digest()
    return int.from_bytes(h[:8], "big") / 2**64


def sources(per_source: int) -> dict[str, list[str]]:
    real = load_real(per_source)
    real["shakespeare"] = bqr.shakespeare_pages(per_source // 2)
    zh = bqr.chinese(per_source // 2)
    real["zh_wiki"], real["zh_reviews"] = zh[: len(zh) // 2], zh[len(zh) // 2 :]
    real["ru_tinystories"] = bqr.russian(per_source)
    return real


def build_mix(out: Path, per_source: int, seed: int = 0) -> dict:
    rng = random.Random(seed)
    nrng = np.random.default_rng(seed)
    real = sources(per_source)
    pool = [
        w
        for k, docs in real.items()
        if not k.startswith(("zh", "ru"))
        for d in docs
        for w in d.split()
    ]
    rows, counts = [], {}
    out.mkdir(parents=True, exist_ok=True)
    for name, docs in real.items():
        held = [d for d in docs if bucket(d, "eval") < HELD_OUT]
        train = [d for d in docs if bucket(d, "eval") >= HELD_OUT]
        with open(out / f"eval_{name}.jsonl", "w", encoding="utf-8") as f:
            f.writelines(json.dumps({"text": d[:EVAL_MAX_CHARS]}) + "\n" for d in held)
        kinds = OTHER_LANG if name.startswith(("zh", "ru")) else JUNK
        dups = junk = 0
        for i, d in enumerate(train):
            rows.append({"id": f"{name}/{i}", "text": d})
            if bucket(d, "dup") < 0.25:
                for c in range(rng.randint(1, 3)):
                    rows.append({"id": f"{name}/{i}#copy{c}", "text": d})
                    dups += 1
                rows.append({"id": f"{name}/{i}#near", "text": _near_copy(d, rng)})
                dups += 1
            if i % 3 == 0:
                kind = kinds[(i // 3) % len(kinds)]
                text = bqr.make_junk(kind, d, nrng, pool, {}, train)
                rows.append({"id": f"{name}/junk{i}:{kind}", "text": text})
                junk += 1
        counts[name] = {"train": len(train), "eval": len(held), "dups": dups, "junk": junk}
    rng.shuffle(rows)
    with open(out / "mix.jsonl", "w", encoding="utf-8") as f:
        f.writelines(json.dumps(r) + "\n" for r in rows)
    # the same rows, one file per source (mix order kept within each): download.sources entries
    (out / "by_source").mkdir(exist_ok=True)
    for name in real:
        with open(out / "by_source" / f"{name}.jsonl", "w", encoding="utf-8") as f:
            f.writelines(json.dumps(r) + "\n" for r in rows if r["id"].split("/", 1)[0] == name)
    return {"docs": len(rows), "mb": round(sum(len(r["text"]) for r in rows) / 1e6, 2), **counts}


def _near_copy(text: str, rng: random.Random) -> str:
    words = text.split(" ")
    for _ in range(max(1, len(words) * 3 // 100)):
        i, j = rng.randrange(len(words)), rng.randrange(len(words))
        words[i], words[j] = words[j], words[i]
    return " ".join(words)


def recipe(
    out: Path,
    name: str,
    demo: dict,
    shares: dict[str, float] | None = None,
    tokenizer: Path | None = None,
    mix: Path | None = None,
) -> Path:
    """The data recipe of one side: demo's blocks on the mix. With `shares` (the `before_shares`
    mix): download.sources, one entry per source file (so each document's `source` is its
    corpus), and shard.source_weights = shares with source_shortfall shrink: the mix is stated
    and kept, whatever the filters keep of each source. With `tokenizer`: that tokenizer.json
    instead of training one (the diagnostic run after_shares_tok: before's tokenizer). With `mix`:
    that JSONL file instead of mix.jsonl (a --variant's mix)."""
    keep = ("clean", "dedup", "quality", "tokenize", "pack", "shard")
    raw = {"name": name, "seed": demo["seed"], "workers": 1, "out_dir": str(out / name)}
    path = mix or out / "mix.jsonl"
    raw["download"] = {"source": "jsonl", "path": str(path), "docs_per_part": 500}
    raw |= {k: demo[k] for k in keep}
    if shares is not None:
        raw["download"] = {
            "docs_per_part": 500,
            "sources": [
                {"source": "jsonl", "path": str(out / "by_source" / f"{s}.jsonl"), "name": s}
                for s in sorted(shares)
            ],
        }
        raw["shard"] = {
            **(raw.get("shard") or {}),
            "source_weights": shares,
            "source_shortfall": "shrink",
        }
    if tokenizer is not None:
        raw["tokenize"] = {"tokenizer_path": str(tokenizer)}
    if name.endswith("_sentence"):  # the honest folds (docs/quality.md, coherence_folds)
        raw["quality"] = {**(raw.get("quality") or {}), "coherence_folds": "sentence"}
    path = out / f"data_{name}.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


def tokens_per_source(run_dir: Path) -> dict[str, int]:
    """Tokens reaching pack per source (tokenize's docs parts: id prefix, num_tokens)."""
    import pyarrow.parquet as pq

    out: dict[str, int] = {}
    for part in sorted((run_dir / "tokenize").glob("part-*.docs.parquet")):
        table = pq.read_table(part, columns=["id", "num_tokens"])
        ids, nums = table.column("id").to_pylist(), table.column("num_tokens").to_pylist()
        for i, n in zip(ids, nums, strict=True):
            out[i.split("/", 1)[0]] = out.get(i.split("/", 1)[0], 0) + n
    return dict(sorted(out.items()))


def token_shares(run_dir: Path) -> dict[str, float]:
    """Each source's share of the tokens reaching pack (4 decimals)."""
    tok = tokens_per_source(run_dir)
    total = sum(tok.values())
    return {s: round(n / total, 4) for s, n in tok.items()}


def shard_stats(run_dir: Path) -> dict:
    """The shard stage's sequences (train, eval, per source) of a data run."""
    report = json.loads((run_dir / "pipeline_report.json").read_text())
    stats = next(s["stats"] for s in report["stages"] if s["stage"] == "shard")
    keys = ("sequences_in", "sequences_train", "sequences_eval", "sequences_per_source")
    return {k: stats[k] for k in keys if k in stats}


def run(cmd: list[str], src: Path) -> None:
    print("+", " ".join(cmd), file=sys.stderr, flush=True)
    subprocess.run(cmd, check=True, env={**os.environ, "PYTHONPATH": str(src)})


def kept_per_source(run_dir: Path) -> dict[str, dict]:
    """Documents per source reaching tokenize (the last filter's kept parts): real, dup and
    junk counts, junk per kind, and the source's share of the bytes reaching tokenize (%): at
    one token budget below an epoch, about its share of the training tokens."""
    import pyarrow.parquet as pq

    out: dict[str, dict] = {}
    size: dict[str, int] = {}
    for part in sorted((run_dir / "quality").glob("part-*.parquet")):
        table = pq.read_table(part, columns=["id", "text"])
        ids, texts = table.column("id").to_pylist(), table.column("text").to_pylist()
        for i, text in zip(ids, texts, strict=True):
            name, rest = i.split("/", 1)
            key = "junk" if "junk" in rest else "dup" if "#" in rest else "real"
            d = out.setdefault(name, {"real": 0, "dup": 0, "junk": 0, "junk_kinds": {}})
            d[key] += 1
            if key == "junk":
                kind = rest.rsplit(":", 1)[1]
                d["junk_kinds"][kind] = d["junk_kinds"].get(kind, 0) + 1
            size[name] = size.get(name, 0) + len(text.encode("utf-8"))
    total = max(sum(size.values()), 1)
    for name, d in out.items():
        d["bytes_share_pct"] = round(100 * size[name] / total, 1)
    return dict(sorted(out.items()))


def verdicts(result: dict, row: int = -1, base: int = 0) -> dict[str, dict]:
    """Per eval source of rows[row] against rows[base] (before): Δ = its mean BPB - base's, the
    standard error over seeds (sqrt(s_b^2/n_b + s_a^2/n_a)) and improves (Δ < -2 se) / holds
    (|Δ| <= 2 se) / worse."""
    before, after = result["rows"][base]["bpb"], result["rows"][row]["bpb"]
    out = {}
    for name, a in after.items():
        b = before[name]
        se = sum(statistics.variance(c["per_seed"]) / len(c["per_seed"]) for c in (a, b)) ** 0.5
        delta = a["mean"] - b["mean"]
        word = "improves" if delta < -2 * se else "holds" if delta <= 2 * se else "worse"
        out[name] = {"delta": round(delta, 4), "se": round(se, 4), "verdict": word}
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--before-src", type=Path, required=True, help="src/ of a checkout at 9311ba7")
    p.add_argument("--out", type=Path, default=ROOT / "outputs" / "ablate_quality")
    p.add_argument("--per-source", type=int, default=300)
    p.add_argument("--seeds", default="0,1")
    p.add_argument("--config", type=Path, default=ROOT / "recipes" / "pretrain_demo.yaml")
    p.add_argument("--set", action="append", default=[], help="pretrain overrides")
    p.add_argument("--data-only", default=None, help="only make this data run (before|after)")
    p.add_argument(
        "--mix",
        choices=("before_shares", "as_filtered", "both"),
        default="both",
        help="after's mix: before's token shares per source (run after_shares: "
        "shard.source_weights, source_shortfall shrink), whatever its filters keep (run after: "
        "one file, no weights), or both runs",
    )
    p.add_argument(
        "--before-tokenizer",
        action="store_true",
        help="also run after_shares_tok: after_shares with before's tokenizer (a diagnostic: "
        "what of a gap is the tokenizer trained on the new mix)",
    )
    p.add_argument(
        "--after-sentence",
        action="store_true",
        help="also run after_sentence: after with quality.coherence_folds: sentence",
    )
    p.add_argument(
        "--variant",
        action="append",
        default=[],
        choices=sorted(VARIANTS) + sorted(REORDERS),
        help="also run this variant (repeatable): one side on the mix less some junk rows "
        "(VARIANTS in the script), judged against that side on the full mix",
    )
    args = p.parse_args()
    t0 = time.perf_counter()
    mix = build_mix(args.out, args.per_source)
    print(json.dumps(mix), file=sys.stderr)
    py = sys.executable
    afters = {"as_filtered": ["after"], "before_shares": ["after_shares"]}.get(
        args.mix, ["after", "after_shares"]
    ) + (["after_shares_tok"] if args.before_tokenizer else [])
    afters += ["after_sentence"] if args.after_sentence else []
    variants = list(dict.fromkeys(args.variant))
    side = {**{v: t[0] for v, t in VARIANTS.items()}, **{v: t[0] for v, t in REORDERS.items()}}
    if any(side[v] == "after" for v in variants) and "after" not in afters:
        afters.insert(0, "after")  # the variant's baseline: after on the full mix
    before_demo = args.before_src.parent / "recipes" / "data_demo.yaml"
    after_demo = ROOT / "recipes" / "data_demo.yaml"
    sides = [("before", args.before_src, before_demo)]
    sides += [(a, ROOT / "src", after_demo) for a in afters]
    side_of = {"before": (args.before_src, before_demo), "after": (ROOT / "src", after_demo)}
    sides += [(v, *side_of[VARIANTS[v][0]]) for v in variants if v in VARIANTS]
    dropped = {}
    for name, src, demo in sides:
        if args.data_only not in (None, name.split("_")[0]):
            continue
        mix_path = None
        if name in VARIANTS:
            mix_path, dropped[name] = variant_mix(args.out, name)
        shares = token_shares(args.out / "before") if "shares" in name else None
        tok = args.out / "before" / "tokenize" / "tokenizer.json" if "tok" in name else None
        demo_raw = yaml.safe_load(demo.read_text())
        path = recipe(args.out, name, demo_raw, shares, tok, mix_path)
        run([py, "-m", "pipeline", "data", "--config", str(path), "-q"], src)
    for v in variants:
        if v in REORDERS and args.data_only in (None, side[v]):
            reorder_run(args.out, v)
    if args.data_only:
        return
    evals = sorted(str(x) for x in args.out.glob("eval_*.jsonl"))
    sets = [x for s in args.set for x in ("--set", s)]
    abl = args.out / "ablate"
    names = ["before", *afters, *variants]
    run(
        [py, "-m", "pipeline", "ablate", *(str(args.out / n) for n in names)]
        + ["--config", str(args.config), "--eval-texts", *evals]
        + ["--seeds", args.seeds, "--out-dir", str(abl), "-q", *sets],
        ROOT / "src",
    )
    result = json.loads((abl / "ablate.json").read_text())
    summary = {
        "mix": mix,
        "after_mix": args.mix,
        "kept_per_source": {n: kept_per_source(args.out / n) for n in names},
        "tokens_per_source": {n: tokens_per_source(args.out / n) for n in names},
        "shard": {n: shard_stats(args.out / n) for n in names},
        "seconds": round(time.perf_counter() - t0, 1),
        "verdicts": (
            {r["run"]: verdicts(result, i) for i, r in enumerate(result["rows"]) if i}
            if len(result["seeds"]) > 1
            else None
        ),
        **result,
    }
    if variants:
        summary["variants"] = {
            v: {
                "side": side[v],
                "isolates": (VARIANTS.get(v) or REORDERS[v])[2],
                "dropped": dropped.get(v),
            }
            for v in variants
        }
        if len(result["seeds"]) > 1:
            summary["variant_verdicts"] = {
                v: verdicts(result, names.index(v), names.index(side[v])) for v in variants
            }
    bench = ROOT / "outputs" / "benchmarks"
    bench.mkdir(parents=True, exist_ok=True)
    (bench / "ablate_quality.json").write_text(json.dumps(summary, indent=2))
    print(bench / "ablate_quality.json")


if __name__ == "__main__":
    main()
