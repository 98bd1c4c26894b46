"""Benchmark: our byte-level BPE vs Hugging Face `tokenizers` (BpeTrainer), rustbpe, bpeasy
and tiktoken.

Same real text (/work/shared/corpora), same vocab (4096, 8192), all single-threaded
(RAYON_NUM_THREADS=1, tiktoken one call per document). Reports training seconds, bytes/token on
the training text and on held-out text, encode MB/s, and the ratios. Writes
outputs/benchmarks/tokenizer.json. tiktoken is not a project dependency: the first run (or
--setup) pip-installs it into .bench-venv-tokenizer/site (git-ignored), put on sys.path here;
rustbpe and bpeasy are timed when installed.

`--before SRC` adds another checkout's tokenizer (e.g. the commit before a change) as the
candidates `ours_before` (training, and a cold `encode_batch` of our merges), run in a child
process with SRC first on sys.path, interleaved with the others; each child reports its own CPU
time and a sha256 of its merges / ids, which must equal ours.
"""

from __future__ import annotations

import os

os.environ["RAYON_NUM_THREADS"] = "1"  # before tokenizers starts its thread pool
os.environ["TOKENIZERS_PARALLELISM"] = "false"

import argparse  # noqa: E402
import gc  # noqa: E402
import gzip  # noqa: E402
import hashlib  # noqa: E402
import importlib  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from functools import partial  # noqa: E402
from pathlib import Path  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SITE = ROOT / ".bench-venv-tokenizer" / "site"
CORPORA = Path(os.environ.get("PIPELINE_CORPORA", "/work/shared/corpora"))
OUT = ROOT / "outputs" / "benchmarks" / "tokenizer.json"
SRC = os.environ.get("BENCH_TOKENIZER_SRC", str(ROOT / "src"))  # --before's children set it
sys.path[:0] = [SRC, str(SITE)]

from pipeline.tokenizer import DEFAULT_SPECIALS, Tokenizer, dumps, train_bpe  # noqa: E402
from pipeline.tokenizer.pretokenize import (  # noqa: E402
    SPLIT_PATTERN,
    compile_pattern,
    special_splitter,
)

try:
    from pipeline.tokenizer.wordcount import count_words  # noqa: E402
except ImportError:  # a checkout from before tokenizer/wordcount.py (--before)
    from pipeline.tokenizer.pretokenize import count_words  # noqa: E402

TRAIN_FILES = [
    "tinystories/tinystories_sample.txt",
    "wikitext-2-raw/wiki.test.raw",
    "tinyshakespeare/input.txt",
    "dolma_cc_web/CC-MAIN-20190717121559-20190717143559-00140.jsonl.gz",
    "tinystories_ru/1b5a9beb-4a00-4797-9667-adecd6d96bc3.jsonl",
]
HELDOUT_FILES = [
    "tinystories/TinyStories-valid-reduced.txt",
    "wikitext-2/valid.txt",
    "reuters21578/reut2-001.sgm",
    "dolma_cc_web/cc_en_head-0091.jsonl",
]
DOC_CHARS = 4000  # plain-text files are cut into documents of about this many characters


def read_docs(rel: str) -> list[str]:
    """Documents of one corpus file: JSONL records, TinyStories stories, or ~4 kB chunks."""
    path = CORPORA / rel
    raw = (
        gzip.open(path, "rt", encoding="utf-8")
        if rel.endswith(".gz")
        else open(path, encoding="utf-8", newline="")
    )
    with raw as f:
        text = f.read()
    if ".jsonl" in rel:
        recs = [json.loads(line) for line in text.split("\n") if line.strip()]
        return [r.get("text") or r.get("story") or "" for r in recs]
    if "tinystories" in rel:
        return [d for d in text.split("<|endoftext|>") if d.strip()]
    docs, cur = [], []
    size = 0
    for para in text.split("\n\n"):
        cur.append(para)
        size += len(para)
        if size >= DOC_CHARS:
            docs.append("\n\n".join(cur))
            cur, size = [], 0
    if cur:
        docs.append("\n\n".join(cur))
    return docs


def nbytes(docs: list[str]) -> int:
    return sum(len(d.encode("utf-8")) for d in docs)


class ChildResult:
    """What a --before child reports: its own CPU seconds and a digest of its output."""

    def __init__(self, seconds: float, sha256: str):
        self.seconds, self.sha256 = seconds, sha256


def run_child(src: str, what: str, vocab: int, merges_file: str = "") -> ChildResult:
    env = dict(os.environ, BENCH_TOKENIZER_SRC=src, PYTHONPATH=src)
    cmd = [sys.executable, __file__, "--child", what, "--vocab", str(vocab)]
    if merges_file:
        cmd += ["--merges", merges_file]
    out = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout
    rec = json.loads(out.strip().splitlines()[-1])
    return ChildResult(rec["seconds"], rec["sha256"])


def digest(obj: object) -> str:
    return hashlib.sha256(json.dumps(obj).encode()).hexdigest()


def child(what: str, vocab: int, merges_file: str) -> None:
    """One timed step in this process (the --before side): print {seconds, sha256}."""
    train = [d for f in TRAIN_FILES for d in read_docs(f)]
    if what == "train":
        gc.collect()
        t0 = time.process_time()
        tok = train_ours(train, vocab)
        secs = time.process_time() - t0
        print(json.dumps({"seconds": secs, "sha256": digest([list(m) for m in tok.merges])}))
        return
    held = [d for f in HELDOUT_FILES for d in read_docs(f)]
    docs = held if what.endswith("_heldout") else train + held
    merges = [tuple(m) for m in json.loads(Path(merges_file).read_text())]
    enc = tiktoken_from(Tokenizer(merges)) if what.startswith("tiktoken") else None
    gc.collect()
    t0 = time.process_time()
    if enc is not None:
        ids = [enc.encode(d, allowed_special="all") for d in docs]
    else:
        ids = Tokenizer(merges).encode_batch(docs)
    secs = time.process_time() - t0
    print(json.dumps({"seconds": secs, "sha256": digest(ids)}))


def interleaved(fns: dict, repeats: int) -> tuple[dict[str, float], dict]:
    """Median CPU seconds per candidate, the candidates run in turn each round, plus each one's
    last result. Every peer runs on one thread, so process CPU time is its cost, and other
    jobs on this shared machine do not count in it; interleaving spreads what they still
    disturb (caches, memory bandwidth) evenly over the peers. A full garbage collection before
    each call (untimed) keeps one peer's garbage from being collected in another's time."""
    times: dict[str, list[float]] = {k: [] for k in fns}
    last = {}
    for _ in range(repeats):
        for k, fn in fns.items():
            last.pop(k, None)
            gc.collect()
            t0 = time.process_time()
            last[k] = fn()
            secs = time.process_time() - t0
            if isinstance(last[k], ChildResult):  # timed in its own process
                secs = last[k].seconds
            times[k].append(secs)
    return {k: statistics.median(v) for k, v in times.items()}, last


def train_ours(docs: list[str], vocab_size: int) -> Tokenizer:
    counts = count_words(docs, compile_pattern(), special_splitter(DEFAULT_SPECIALS))
    res = train_bpe(counts, vocab_size - 256 - len(DEFAULT_SPECIALS), min_frequency=2)
    return Tokenizer(res.merges)


def train_hf(docs: list[str], vocab_size: int, same_split: bool):
    from tokenizers import Regex, decoders, models, pre_tokenizers, trainers
    from tokenizers import Tokenizer as HFTokenizer

    tok = HFTokenizer(models.BPE())
    if same_split:  # our pattern (digits in runs <= 3), exactly as in our tokenizer.json
        tok.pre_tokenizer = pre_tokenizers.Sequence(
            [
                pre_tokenizers.Split(Regex(SPLIT_PATTERN), behavior="isolated"),
                pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
            ]
        )
    else:  # stock ByteLevel: GPT-2's pattern
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=2,
        show_progress=False,
        special_tokens=list(DEFAULT_SPECIALS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(docs, trainer=trainer)
    return tok


def train_rustbpe(docs: list[str], vocab_size: int) -> dict[bytes, int]:
    import rustbpe

    tok = rustbpe.Tokenizer()  # no specials: as many merges as ours
    tok.train_from_iterator(iter(docs), vocab_size - len(DEFAULT_SPECIALS), pattern=SPLIT_PATTERN)
    return dict(tok.get_mergeable_ranks())


def train_bpeasy(docs: list[str], vocab_size: int) -> dict[bytes, int]:
    import bpeasy

    return bpeasy.train_bpe(iter(docs), SPLIT_PATTERN, 256, vocab_size - len(DEFAULT_SPECIALS))


def have(module: str) -> bool:
    try:
        importlib.import_module(module)
    except ImportError:
        return False
    return True


def tiktoken_of_ranks(ranks: dict[bytes, int]):
    import tiktoken

    return tiktoken.Encoding(
        name="peer", pat_str=SPLIT_PATTERN, mergeable_ranks=ranks, special_tokens={}
    )


def tiktoken_from(tok: Tokenizer):
    import tiktoken

    ranks = {tok.id_bytes[i]: i for i in range(256 + len(tok.merges))}  # rank == our id
    return tiktoken.Encoding(
        name="ours", pat_str=SPLIT_PATTERN, mergeable_ranks=ranks, special_tokens=dict(tok.specials)
    )


def bench_train(
    vocab: int, train: list[str], held: list[str], repeats: int, before: str | None
) -> tuple[dict, Tokenizer]:
    fns = {
        "ours": lambda: train_ours(train, vocab),
        "hf_same_split": lambda: train_hf(train, vocab, same_split=True),
        "hf_bytelevel": lambda: train_hf(train, vocab, same_split=False),
    }
    if before:
        fns["ours_before"] = lambda: run_child(before, "train", vocab)
    if have("rustbpe"):
        fns["rustbpe"] = lambda: train_rustbpe(train, vocab)
    if have("bpeasy"):
        fns["bpeasy"] = lambda: train_bpeasy(train, vocab)
    secs, toks = interleaved(fns, repeats)
    ours = toks["ours"]
    bpt = {}
    peers = [k for k in ("rustbpe", "bpeasy") if k in toks and have_tiktoken()]
    for split, docs in (("train", train), ("heldout", held)):
        bpt[f"ours_{split}"] = nbytes(docs) / sum(len(ours.encode(d)) for d in docs)
        for k in ("hf_same_split", "hf_bytelevel"):
            n = sum(len(e.ids) for e in toks[k].encode_batch(docs))
            bpt[f"{k}_{split}"] = nbytes(docs) / n
        for k in peers:
            enc = tiktoken_of_ranks(toks[k])
            bpt[f"{k}_{split}"] = nbytes(docs) / sum(len(enc.encode_ordinary(d)) for d in docs)
    out = {
        "train_seconds": secs,
        "train_ratio_ours_over_hf_same_split": secs["ours"] / secs["hf_same_split"],
        "train_ratio_ours_over_hf_bytelevel": secs["ours"] / secs["hf_bytelevel"],
        "train_ratio_ours_over_peer": {k: secs["ours"] / v for k, v in secs.items() if k != "ours"},
        "bytes_per_token": bpt,
        "bytes_per_token_gap_vs_hf": {  # ours / HF - 1; positive = ours compresses better
            f"{k}_{split}": bpt[f"ours_{split}"] / bpt[f"{k}_{split}"] - 1
            for k in ("hf_same_split", "hf_bytelevel")
            for split in ("train", "heldout")
        },
    }
    if before:
        same = toks["ours_before"].sha256 == digest([list(m) for m in ours.merges])
        out["merges_identical_to_before"] = same
    return out, ours


def _hf_from(ours: Tokenizer):
    from tokenizers import Tokenizer as HFTokenizer

    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "tokenizer.json").write_bytes(dumps(ours))
        return HFTokenizer.from_file(str(Path(tmp) / "tokenizer.json"))


def bench_encode(
    ours: Tokenizer, train: list[str], held: list[str], repeats: int, before: str | None
) -> dict:
    """All three encode with our merges: HF loads our tokenizer.json, tiktoken gets our ranks.

    Three views of our caches: cold (a fresh tokenizer, one pass over train + held-out), warm
    (the same text again), and held-out after a warm-up on the training text: new text with
    caches filled by other text, the steady state of a long run.
    """
    docs = train + held
    hf, enc = _hf_from(ours), tiktoken_from(ours) if have_tiktoken() else None
    warm = Tokenizer(ours.merges)
    warm.encode_batch(train)
    primed = []  # one train-warmed tokenizer per round, made outside the timed region
    for _ in range(repeats):
        t = Tokenizer(ours.merges)
        t.encode_batch(train)
        primed.append(t)
    warm.encode_batch(held)

    def cold():
        return Tokenizer(ours.merges).encode_batch(docs)

    def cold_per_doc():
        t = Tokenizer(ours.merges)
        return [t.encode(d) for d in docs]

    def heldout_primed():
        t = primed.pop()  # each round gets its own copy: never warmed by a previous round
        return t.encode_batch(held)

    fns = {
        "ours_cold_cache": cold,
        "ours_cold_per_doc": cold_per_doc,
        "ours_warm_cache": lambda: warm.encode_batch(docs),
        "hf_encode_batch": lambda: hf.encode_batch(docs),
        "ours_heldout_after_train": heldout_primed,
        "hf_heldout": lambda: hf.encode_batch(held),
    }
    if enc is not None:
        fns["tiktoken"] = lambda: [enc.encode(d, allowed_special="all") for d in docs]
        fns["tiktoken_heldout"] = lambda: [enc.encode(d, allowed_special="all") for d in held]
    merges_file = tempfile.NamedTemporaryFile("w", suffix=".json", delete=False)
    with merges_file:
        json.dump([list(m) for m in ours.merges], merges_file)
    if before:
        fns["ours_before_cold_cache"] = lambda: run_child(
            before, "encode", ours.vocab_size, merges_file.name
        )
    secs, last = interleaved(fns, repeats)
    os.unlink(merges_file.name)
    mb, mb_held = nbytes(docs) / 1e6, nbytes(held) / 1e6
    mbs = {k: (mb_held if "heldout" in k else mb) / v for k, v in secs.items()}
    ids = last["ours_cold_cache"]

    def same(other: list) -> float:
        return sum(a == b for a, b in zip(ids, other, strict=True)) / len(docs)

    assert last["ours_cold_per_doc"] == ids, "encode_batch and encode disagree"

    hfs = mbs["hf_encode_batch"]
    tt, tth = mbs.get("tiktoken"), mbs.get("tiktoken_heldout")
    extra = {}
    if before:
        extra["ids_identical_to_before"] = last["ours_before_cold_cache"].sha256 == digest(ids)
        extra["encode_ratio_ours_cold_over_before"] = (
            mbs["ours_cold_cache"] / mbs["ours_before_cold_cache"]
        )
        if tt:
            extra["encode_ratio_before_cold_over_tiktoken"] = mbs["ours_before_cold_cache"] / tt
    return extra | {
        "encode_mb": round(mb, 3),
        "heldout_mb": round(mb_held, 3),
        "encode_mb_per_s": mbs,
        "encode_ratio_ours_cold_over_hf": mbs["ours_cold_cache"] / hfs,
        "encode_ratio_ours_warm_over_hf": mbs["ours_warm_cache"] / hfs,
        "encode_ratio_heldout_ours_over_hf": mbs["ours_heldout_after_train"] / mbs["hf_heldout"],
        "encode_ratio_ours_cold_over_tiktoken": mbs["ours_cold_cache"] / tt if tt else None,
        "encode_ratio_ours_cold_per_doc_over_tiktoken": (
            mbs["ours_cold_per_doc"] / tt if tt else None
        ),
        "encode_ratio_ours_warm_over_tiktoken": mbs["ours_warm_cache"] / tt if tt else None,
        "encode_ratio_heldout_ours_over_tiktoken": (
            mbs["ours_heldout_after_train"] / tth if tth else None
        ),
        "ids_identical_docs_fraction": {
            "hf": same([e.ids for e in last["hf_encode_batch"]]),
            "tiktoken": same(last["tiktoken"]) if enc is not None else None,
        },
    }


def bench_encode_children(vocab: int, train: list[str], repeats: int, before: str | None) -> dict:
    """Cold encode of train + held-out with our merges, each candidate in a fresh process per
    round (ours, --before's, tiktoken): no candidate inherits the heap of the others, as they
    do in bench_encode's one process."""
    ours = train_ours(train, vocab)
    merges_file = tempfile.NamedTemporaryFile("w", suffix=".json", delete=False)
    with merges_file:
        json.dump([list(m) for m in ours.merges], merges_file)
    src = str(ROOT / "src")
    fns = {}
    for text in ("", "_heldout"):  # train + held-out (11 MB), and the held-out text alone

        def step(src: str = src, what: str = "encode" + text) -> ChildResult:
            return run_child(src, what, vocab, merges_file.name)

        fns["ours_cold_cache" + text] = step
        if before:
            fns["ours_before_cold_cache" + text] = partial(step, before)
        fns["tiktoken" + text] = partial(step, src, "tiktoken" + text)
    secs, last = interleaved(fns, repeats)
    os.unlink(merges_file.name)
    held = [d for f in HELDOUT_FILES for d in read_docs(f)]
    size = {"": nbytes(train + held) / 1e6, "_heldout": nbytes(held) / 1e6}
    mbs = {k: size["_heldout" if k.endswith("_heldout") else ""] / v for k, v in secs.items()}
    out = {
        "vocab_size": vocab,
        "encode_mb": round(size[""], 3),
        "encode_heldout_mb": round(size["_heldout"], 3),
        "encode_seconds": secs,
        "encode_mb_per_s": mbs,
        "encode_ratio_over_tiktoken": {
            k: v / mbs["tiktoken_heldout" if k.endswith("_heldout") else "tiktoken"]
            for k, v in mbs.items()
        },
    }
    for text in ("", "_heldout"):
        ours = last["ours_cold_cache" + text].sha256
        out["ids_identical_to_tiktoken" + text] = ours == last["tiktoken" + text].sha256
        if before:
            out["ids_identical_to_before" + text] = (
                ours == last["ours_before_cold_cache" + text].sha256
            )
    return out


def bench_vocab(
    vocab: int, train: list[str], held: list[str], repeats: int, before: str | None
) -> dict:
    out: dict = {"vocab_size": vocab, "train_mb": round(nbytes(train) / 1e6, 3)}
    tr, ours = bench_train(vocab, train, held, repeats, before)
    out.update(tr)
    out.update(bench_encode(ours, train, held, repeats, before))
    return out


def have_tiktoken() -> bool:
    try:
        import tiktoken  # noqa: F401
    except ImportError:
        return False
    return True


def tiktoken_version() -> str | None:
    if not have_tiktoken():
        return None
    import tiktoken

    return tiktoken.__version__


def _version(dist: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except PackageNotFoundError:
        return None


def setup() -> None:
    """pip-install tiktoken (no deps: regex is ours already) into SITE, already on sys.path."""
    SITE.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(SITE)]
    subprocess.run([*cmd, "tiktoken"], check=True)
    importlib.invalidate_caches()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--setup", action="store_true", help="install tiktoken into the bench dir")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--vocab", type=int, nargs="+", default=[4096, 8192])
    ap.add_argument("--before", help="src/ of another checkout, timed beside ours")
    ap.add_argument(
        "--encode-children",
        action="store_true",
        help="only the cold encode, each candidate in a fresh process per round",
    )
    ap.add_argument(
        "--child",
        choices=["train", "encode", "tiktoken", "encode_heldout", "tiktoken_heldout"],
        help=argparse.SUPPRESS,
    )
    ap.add_argument("--merges", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.child, args.vocab[0], args.merges)
        return
    if args.setup or not have_tiktoken():
        try:
            setup()
        except (OSError, subprocess.CalledProcessError) as exc:  # offline: run without it
            print(f"tiktoken could not be installed ({exc}); skipping that peer", flush=True)
    train = [d for f in TRAIN_FILES for d in read_docs(f)]
    held = [d for f in HELDOUT_FILES for d in read_docs(f)]
    if args.encode_children:
        res = [bench_encode_children(v, train, args.repeats, args.before) for v in args.vocab]
        path = OUT.with_name("tokenizer_encode_children.json")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"repeats": args.repeats, "results": res}, indent=1) + "\n")
        print(json.dumps(res, indent=1))
        print(f"wrote {path}")
        return
    results = []
    for v in args.vocab:
        r = bench_vocab(v, train, held, args.repeats, args.before)
        print(json.dumps(r, indent=1), flush=True)
        results.append(r)
    import tokenizers

    out = {
        "benchmark": "tokenizer",
        "repeats": args.repeats,
        "threads": 1,
        "python": sys.version.split()[0],
        "tokenizers": tokenizers.__version__,
        "tiktoken": tiktoken_version(),
        "rustbpe": _version("rustbpe"),
        "bpeasy": _version("bpeasy"),
        "before": args.before,
        "train_files": TRAIN_FILES,
        "heldout_files": HELDOUT_FILES,
        "train_docs": len(train),
        "heldout_docs": len(held),
        "results": results,
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
