"""The fitted LM scorer (fold n-gram models + coherence classifiers) as one .npz file.

Written once by the driver; every worker process loads it once (cached by path and size), so
parts never carry the model through pickling. Stored uncompressed with fixed timestamps and
member order: the same scorer gives the same bytes. Loaded with allow_pickle=False.
"""

from __future__ import annotations

import functools
import io
import json
import zipfile
from pathlib import Path

import numpy as np

from pipeline.errors import DataError
from pipeline.quality.coherence import Coherence
from pipeline.quality.folds import FoldRouter
from pipeline.quality.lmscore import LMParams, LMScorer
from pipeline.quality.ngram import TOKENIZER_VERSION, HashTable, NgramLM

LM_FORMAT = "pipeline-quality-ngram-v2"  # v2: keys only, the probe slots rebuilt on load


def _arrays(lm: NgramLM) -> dict[str, np.ndarray]:
    out = {"discounts": lm.discounts, "uni_counts": lm.uni_counts}
    for k, (t, v) in enumerate(zip(lm.tables, lm.values, strict=True)):
        out.update({f"o{k}.keys": t.keys, f"o{k}.values": v})
    for k, t in enumerate(lm.ctx_tables):
        out[f"c{k}.keys"] = t.keys
        out[f"c{k}.total"], out[f"c{k}.types"] = lm.ctx_total[k], lm.ctx_types[k]
    return out


def _params(sc: LMScorer) -> dict:
    """LMParams as stored: with feature set 1 (the default) the set-2 keys are left out, so a
    set-1 file has the bytes it had before they existed."""
    set1 = sc.params.feature_set == 1  # set 1 reads neither detector key
    drop = ("feature_set", "detector_keep", "detector_lift") if set1 else ()
    drop += ("folds",) if sc.params.folds == "doc" else ()  # doc: the bytes before the key
    drop += ("detector_lift",) if sc.params.detector_lift == "quantile" and not set1 else ()
    drop += ("chain_docs",) if sc.params.chain_docs == 0 or set1 else ()  # 0: the bytes before
    drop += ("copy_folds",) if not sc.params.copy_folds else ()  # False: the bytes before
    return {k: v for k, v in sc.params.__dict__.items() if k not in drop}


def _b(b: float | np.ndarray) -> float | list[float]:
    return b if np.ndim(b) == 0 else np.asarray(b).tolist()


def scorer_bytes(sc: LMScorer) -> bytes:
    meta = {
        "format": LM_FORMAT,
        "tokenizer": TOKENIZER_VERSION,
        "order": sc.lm.order,
        "params": _params(sc),
        "usable": sc.usable,
        "classifiers": {
            str(s): {
                "mean": c.mean.tolist(),
                "std": c.std.tolist(),
                "w": c.w.tolist(),
                "b": _b(c.b),
            }
            for s, c in sc.classifiers.items()
        },
        "info": sc.info,
    }
    arrays = {"meta_json": np.frombuffer(json.dumps(meta, sort_keys=True).encode(), np.uint8)}
    arrays.update(_arrays(sc.lm))
    if sc.router is not None:
        arrays.update(sc.router.arrays())
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as zf:
        for name, arr in arrays.items():
            member = zipfile.ZipInfo(f"{name}.npy", date_time=(1980, 1, 1, 0, 0, 0))
            with zf.open(member, "w") as out:
                np.lib.format.write_array(out, np.ascontiguousarray(arr), allow_pickle=False)
    return buf.getvalue()


@functools.lru_cache(maxsize=2)
def _load_cached(path: str, size: int) -> LMScorer:
    try:
        with np.load(path, allow_pickle=False) as f:
            meta = json.loads(bytes(f["meta_json"]).decode())
            if meta.get("format") != LM_FORMAT or meta.get("tokenizer") != TOKENIZER_VERSION:
                raise DataError(path, f"not a {LM_FORMAT} file with tokenizer {TOKENIZER_VERSION}")
            n = meta["order"]

            def table(prefix: str) -> HashTable:
                return HashTable.build(f[f"{prefix}.keys"])

            lm = NgramLM(
                n,
                [table(f"o{k}") for k in range(n)],
                [f[f"o{k}.values"] for k in range(n)],
                [table(f"c{k}") for k in range(n - 1)],
                [f[f"c{k}.total"] for k in range(n - 1)],
                [f[f"c{k}.types"] for k in range(n - 1)],
                f["discounts"],
                f["uni_counts"],
            )
            params = LMParams(**meta["params"])
            router = None
            if params.folds == "sentence":
                router = FoldRouter(
                    lm.num_folds,
                    params.seed,
                    f["route.sent_keys"],
                    f["route.sent_fold"],
                    f["route.doc_keys"],
                    f["route.doc_fold"],
                )
    except (OSError, KeyError, ValueError, zipfile.BadZipFile) as exc:
        raise DataError(path, f"not a quality LM file ({exc})") from None
    classifiers = {
        int(s): Coherence(
            np.array(c["mean"]),
            np.array(c["std"]),
            np.array(c["w"]),
            c["b"] if np.ndim(c["b"]) == 0 else np.array(c["b"]),
        )
        for s, c in meta["classifiers"].items()
    }
    return LMScorer(lm, classifiers, params, meta["usable"], meta["info"], router)


def load_scorer(path: Path) -> LMScorer:
    """The scorer in `path`, loaded once per process."""
    return _load_cached(str(path), Path(path).stat().st_size)
