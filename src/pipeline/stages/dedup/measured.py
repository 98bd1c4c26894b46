"""dedup's in-run measurement, the stage side: what map 2 returns for the sampled documents
(their shingle sets, clusters, label counts) and the stats and log line the driver makes of it.
The estimators are pipeline.dedup.measure. The samples are drawn where the stage already has
what they need: the recall documents (with their shingle sets) by map 1, the merged pairs by the
near-cluster tasks; `_draw` in the stage keeps the global smallest keys of both."""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import pyarrow as pa

from pipeline.config import setting
from pipeline.dedup import cluster as cl
from pipeline.dedup import measure
from pipeline.dedup.minhash import shingle_sets
from pipeline.stage import StageContext
from pipeline.stages.dedup.config import DedupConfig


def measure_payload(
    table: pa.Table, lo: int, decision: np.ndarray, cluster: np.ndarray, want: dict[str, Any]
) -> dict[str, Any]:
    """Shingle sets of this part's sampled rows and of the kept members of sampled clusters,
    plus label counts when the documents carry a duplicate `label` (toy)."""
    t0 = time.process_time()
    here = (lo, lo + len(decision))
    rows = want["rows"]
    rows = rows[(rows >= here[0]) & (rows < here[1])] - lo
    keep = decision == cl.KEEP
    winners = np.flatnonzero(keep & np.isin(cluster, want["clusters"]))
    take = np.union1d(rows, winners).astype(np.int64)
    texts = table.column("text").take(pa.array(take)).to_pylist()
    docs = want["docs"]
    docs = docs[(docs >= here[0]) & (docs < here[1])] - lo
    out: dict[str, Any] = {
        "index": lo + take,
        "cluster": cluster[take],
        "kept": keep[take],
        "sets": shingle_sets(texts, want["ngram"], want["seed"]) if texts else [],
        "doc_index": lo + docs,  # the recall sample's clusters (their sets came from map 1)
        "doc_cluster": cluster[docs],
    }
    if "label" in table.column_names:
        labelled = np.array([measure.is_dup_label(x) for x in table.column("label").to_pylist()])
        dropped = ~keep
        out["labels"] = (
            int((dropped & labelled).sum()),
            int((dropped & ~labelled).sum()),
            int((~dropped & labelled).sum()),
        )
    out["seconds"] = time.process_time() - t0
    return out


def measured_stats(cfg: DedupConfig, want: dict[str, Any], results: list[dict]) -> dict[str, Any]:
    """Precision of the sampled merges, recall of the sampled pairs, labelled P/R/F1."""
    sets: dict[int, np.ndarray] = dict(want["sets"])
    clusters: dict[int, int] = {}
    winner: dict[int, np.ndarray] = {}  # cluster -> its kept member's shingles
    labels = [r["measure"]["labels"] for r in results if "labels" in r["measure"]]
    for r in results:
        m = r["measure"]
        clusters.update(zip(m["doc_index"].tolist(), m["doc_cluster"].tolist(), strict=True))
        for i, c, kept, s in zip(
            m["index"].tolist(), m["cluster"].tolist(), m["kept"].tolist(), m["sets"], strict=True
        ):
            sets[i], clusters[i] = s, c
            if kept and c >= 0:
                winner[c] = s
    dropped = [sets[i] for i in want["dropped"].tolist()]
    kept = [winner[c] for c in want["dropped_clusters"].tolist()]
    prec, jac = measure.precision_of_merges(dropped, kept, cfg.threshold)
    docs = want["docs"].tolist()
    rec = measure.recall_of_pairs(
        [sets[i] for i in docs], np.array([clusters[i] for i in docs], np.int64), cfg.threshold
    )
    out = {
        "merge_precision": prec["estimate"],
        "merge_precision_ci95": [prec["ci95_low"], prec["ci95_high"]],
        **setting(cfg, "precision_sample_pairs", "merge_precision_sample", value=prec["sample"]),
        "merge_jaccard_min": round(float(jac.min()), 4) if len(jac) else None,
        "pair_recall": rec["estimate"],
        "pair_recall_ci95": [rec["ci95_low"], rec["ci95_high"]],
        "pair_recall_pairs": rec["sample"],
        **setting(cfg, "recall_sample_docs", "pair_recall_docs", value=rec["docs"]),
        **setting(cfg, "recall_max_share", "pair_recall_docs_max_share"),
        "pair_recall_pairs_compared": rec["pairs_compared"],
    }
    if labels:
        tp, fp, fn = (sum(x[j] for x in labels) for j in range(3))
        got = measure.prf(tp, fp, fn)
        out.update({f"labelled_{k}": v for k, v in got.items()})
    return out


def _ci(stats: dict[str, Any], key: str) -> str:
    lo, hi = stats[f"{key}_ci95"]
    return "n/a" if stats[key] is None else f"{stats[key]:.3f} (95% CI {lo:.3f}-{hi:.3f})"


def log_measured(ctx: StageContext, stats: dict[str, Any]) -> None:
    ctx.log.info(
        "[dedup] measured: merge precision %s over %d merged pairs; pair recall %s over %d "
        "pairs >= threshold among %d sampled documents%s",
        _ci(stats, "merge_precision"),
        stats["merge_precision_sample"],
        _ci(stats, "pair_recall"),
        stats["pair_recall_pairs"],
        stats["pair_recall_docs"],
        f"; labelled F1 {stats['labelled_f1']}" if stats.get("labelled_f1") is not None else "",
    )
