"""Fit the reference LM (k folds) and the per-script coherence classifiers; score any texts.

Pure functions of texts, global row numbers and a seed; the quality stage does the I/O. A
reference document in fold f trains every model but model f, and any document in fold f is
scored by model f, so with `self` no document is ever scored by a model that saw it.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pipeline.quality import copies
from pipeline.quality.coherence import (
    FEATURE_NAMES,
    FEATURE_SETS,
    SURFACE_SETS,
    Coherence,
    doc_features,
    fold_of,
    stack_detectors,
    train_coherence,
)
from pipeline.quality.corrupt import KINDS, corrupt_tokens
from pipeline.quality.folds import FoldRouter, build_router, sentence_partners
from pipeline.quality.logreg import roc_auc
from pipeline.quality.ngram import SCRIPTS, NgramLM, Tokens, tokenize, train_lm

# Sentence shuffles keep every n-gram but those across a sentence boundary: the LM features
# cannot see them (train AUC ~0.51 measured), so as negatives they would only add label noise.
# Markov walks over the reference (order 1 and 3) and cross-document sentence splices train
# the document-scale features (long_repeat, halves_shared); block shuffles and the order-2 walk
# are held out, to report how the classifier does on kinds it did not train on.
TRAIN_KINDS = (
    "word_shuffle",
    "unigram_salad",
    "word_drop",
    "salad_block",
    "bigram_chain",
    "trigram_chain",
    "fourgram_chain",
    "splice",
)
HELD_OUT_KINDS = tuple(k for k in KINDS if k not in TRAIN_KINDS)
# feature set 1 (quality.coherence_features: 1) trained without the order-2 walk
TRAIN_KINDS_V1 = tuple(k for k in TRAIN_KINDS if k != "trigram_chain")
HELD_OUT_KINDS_V1 = tuple(k for k in KINDS if k not in TRAIN_KINDS_V1)
# Feature set 2: a splice draws its sentences from this many other documents (inclusive range),
# as spun pages do; set 1 drew every sentence from any document of the sample
SPLICE_SOURCES = (2, 6)
# Feature set 2: one detector per family of training kinds, P(coherent) = the lowest (see
# coherence.Coherence); every detector sees every positive and its family's negatives
DETECTORS = {
    "local": ("word_shuffle", "unigram_salad", "word_drop", "salad_block"),
    "markov": ("bigram_chain", "trigram_chain", "fourgram_chain"),
    "splice": ("splice",),
}
# Feature set 4: its entity columns feed the splice detector only; the others read set 2's
# columns (with them too, the Chinese order-1 walks fell from 0.80 to 0.72 AUC, 4 seeds)
DETECTOR_COLUMNS = {4: {"local": len(FEATURE_SETS[2]), "markov": len(FEATURE_SETS[2])}}
# folds: sentence: a reference document that shares sentences with more than this many other
# reference documents (stitched from them: a splice, a spun page in a `self` reference) is no
# positive; the document it copied from shares with one, and stays one
POSITIVE_MAX_PARTNERS = 1
# chain_docs applies to these scripts, whose LM tokens are words: a character chain (Han,
# Kana; Thai and the other unspaced scripts sit in "other") over a few dozen documents copies
# them nearly verbatim (Chinese order-2 walks: AUC 0.924 -> 0.906 with groups of 50, 3 seeds)
GROUPED_CHAIN_SCRIPTS = ("latin", "cyrillic")
# copy_folds clears the fold models of sources in these scripts only. Measured (docs/quality.md,
# "Copies leave their sources' folds"; quick sets, 4 junk seeds): Chinese real kept 96.4% ->
# 97.3%, splices 0.943 -> 0.957 AUC, order-2 walks 0.917 -> 0.932; applied to English too it
# kept the same real text (98.5%) and lowered its walks and splices by 0.005-0.015
COPY_FOLD_SCRIPTS = ("cjk",)
DETECTOR_KEEP = 0.98  # default: each detector's bias keeps at least this share of the positives
# Context gain (nats/token) below which context makes words *less* likely than their corpus
# frequency: no real text does that; salad and shuffles do (~-0.6 measured). Coherence is
# multiplied by sigmoid((gain - GAIN_FLOOR) / GAIN_SCALE), an absolute rule that holds even
# when the reference itself is junk (an all-junk corpus), and such reference documents are
# not used as positives.
GAIN_FLOOR = 0.0
GAIN_SCALE = 0.1
# Share of a document in 32-token blocks that gain nothing from context: real text measured
# <= 0.15 (99th percentile, any source), half-salad pages ~0.42. Up to LOW_OK costs nothing,
# from LOW_MAX on coherence is 0, linear in between.
LOW_OK, LOW_MAX = 0.2, 0.45


def gain_gate(feats: np.ndarray) -> np.ndarray:
    """Absolute rules on top of the classifier: sigmoid((gain - GAIN_FLOOR) / GAIN_SCALE) times
    clip((LOW_MAX - low_block_share) / (LOW_MAX - LOW_OK), 0, 1)."""
    gain, low = feats[:, 1], feats[:, FEATURE_NAMES.index("low_block_share")]
    salad = np.clip((LOW_MAX - low) / (LOW_MAX - LOW_OK), 0.0, 1.0)
    return 0.5 * (1.0 + np.tanh(0.5 * (gain - GAIN_FLOOR) / GAIN_SCALE)) * salad


@dataclass(frozen=True)
class LMParams:
    order: int = 4
    num_folds: int = 4
    min_reference_docs: int = 20  # per script: fewer -> that script gets no LM score
    max_train_docs: int = 4_000  # coherence classifier: positives (half) + negatives (half)
    max_chars: int = 100_000
    seed: int = 0
    # coherence.FEATURE_SETS. 1 here: an lm.npz written before the key existed holds set 1;
    # the stage passes quality.coherence_features (default 2)
    feature_set: int = 1
    detector_keep: float = DETECTOR_KEEP  # set 2: each detector passes this share of positives
    # set 2: "quantile" (an lm.npz written before the key existed) lifts each detector's bias to
    # pass detector_keep of all positives; "mixture" of the positives it estimates are real
    # (detector_lift); the stage passes quality.coherence_detector_lift
    detector_lift: str = "quantile"
    # quality/folds.py: "doc" (an lm.npz written before the key existed) or "sentence"; the
    # stage passes quality.coherence_folds
    folds: str = "doc"
    # set 2+: the Markov corruptions' chains over seeded groups of this many reference
    # documents (corrupt.markov_chains; GROUPED_CHAIN_SCRIPTS only); 0 (an lm.npz written
    # before the key existed): one chain over the whole reference; the stage passes
    # quality.coherence_chain_docs
    chain_docs: int = 0
    # doc folds: a reference document that copies sentences of others (more partners than its
    # source) is left out of its sources' fold models too, for sources in COPY_FOLD_SCRIPTS
    # (copies.copier_exclusions); False (an lm.npz written before the key existed): only of
    # its own; the stage passes quality.copy_folds
    copy_folds: bool = False


@dataclass
class LMScorer:
    lm: NgramLM  # one model per fold (columns)
    classifiers: dict[int, Coherence]  # script index -> classifier (scripts with a reference)
    params: LMParams
    usable: list[int]  # scripts with min_reference_docs reference documents
    info: dict[str, Any] = field(default_factory=dict)
    router: FoldRouter | None = None  # folds: sentence (quality/folds.py); None: doc

    def folds(self, tokens: Tokens, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        """(fold per document [n], fold per token [T] or None: the document's) of documents
        with text keys `keys`: fold_of(key) (folds: doc) or the router's (folds: sentence)."""
        if self.router is None:
            return fold_of(keys, self.lm.num_folds, self.params.seed), None
        return self.router.folds(tokens, keys)

    def features(self, texts: list[str], rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(features float64 [n, F], script int8 [n]) of texts with fold keys `rows`
        (text_keys(texts)), scored by the models of `folds`. Needs no classifier: runs in the
        workers."""
        feats, toks = self.features_and_tokens(texts, rows)
        return feats, toks.script

    def features_and_tokens(self, texts: list[str], rows: np.ndarray) -> tuple[np.ndarray, Tokens]:
        """(`features`' float64 [n, F], the texts' tokens): the tokens also give the corpus-wide
        sentence rows (quality/copies.py) without a second tokenize."""
        toks = tokenize(texts, self.params.max_chars, self.params.feature_set in SURFACE_SETS)
        fold, tok_fold = self.folds(toks, rows)
        return doc_features(self.lm, toks, fold, self.params.feature_set, tok_fold), toks

    def coherence(self, feats: np.ndarray, script: np.ndarray) -> np.ndarray:
        """float64 [n]: P(coherent) x the absolute gates; NaN where the script has no model or
        the document no tokens."""
        return coherence_of(self.classifiers, feats, script)


def coherence_of(
    classifiers: dict[int, Coherence], feats: np.ndarray, script: np.ndarray
) -> np.ndarray:
    """LMScorer.coherence without the LM: what a task needs is the classifiers (a few floats)."""
    coh = np.full(len(feats), np.nan)
    for s, clf in classifiers.items():
        m = (script == s) & (feats[:, FEATURE_NAMES.index("log_tokens")] > 0)
        coh[m] = clf.predict(feats[m]) * gain_gate(feats[m])
    return coh


@dataclass
class Reference:
    """The tokenised reference and the fold of each of its documents."""

    tokens: Tokens
    rows: np.ndarray  # uint64: each document's fold key (text_keys)


def text_keys(texts: list[str]) -> np.ndarray:
    """uint64 [n]: a 64-bit hash of each text, the key its fold is drawn from: the same text
    (an exact copy, or the same document in another run) always falls in the same fold, and
    nothing else about the corpus moves it."""
    return np.fromiter(
        (
            int.from_bytes(hashlib.blake2b(t.encode(), digest_size=8).digest(), "little")
            for t in texts
        ),
        np.uint64,
        len(texts),
    )


def fit_lm(
    ref_texts: list[str], ref_rows: np.ndarray, params: LMParams, drop_splices: bool = False
) -> tuple:
    """(LMScorer without classifiers, Reference), or (why there is none, None): no script has
    min_reference_docs reference documents. A document's fold is fold_of(its key): `ref_rows`
    are the texts' `text_keys`. `drop_splices` (quality.splice_gate): reference documents that
    the splice gate (quality/copies.py), applied within the reference, puts below 0.5 are left
    out: a splice in the reference would let the fold models of its sources' documents see
    them through the copy (they then read as too predictable)."""
    toks = tokenize(ref_texts, params.max_chars, params.feature_set in SURFACE_SETS)
    has = toks.lengths > 0
    spliced = np.zeros(len(has), bool)
    if drop_splices:
        den, shared, top = copies.copy_stats(*copies.sentence_rows(toks), len(has))
        spliced = has & (copies.splice_gate(den, shared, top) < 0.5)
        has &= ~spliced
    counts = np.bincount(toks.script[has], minlength=len(SCRIPTS))
    usable = [s for s in range(len(SCRIPTS)) if counts[s] >= max(params.min_reference_docs, 2)]
    per_script = {SCRIPTS[s]: int(counts[s]) for s in range(len(SCRIPTS)) if counts[s]}
    if not usable:
        why = (
            f"the reference has {int(has.sum())} documents with words ({per_script}); "
            f"a script needs min_reference_docs={params.min_reference_docs}"
        )
        return why, None
    k = int(min(params.num_folds, max(int(has.sum()), 2)))
    keep = np.flatnonzero(has)
    ref = Reference(toks.doc_slice(keep), ref_rows[keep])
    router, routing = None, {"rule": "doc"}
    if params.folds == "sentence":
        router, doc_fold, routing = build_router(ref.tokens, ref.rows, k, params.seed)
    else:
        doc_fold = fold_of(ref.rows, k, params.seed)
    exclude = None
    if params.copy_folds and router is None:
        sources = np.isin(ref.tokens.script, [SCRIPTS.index(s) for s in COPY_FOLD_SCRIPTS])
        none = np.zeros(0, np.int64)  # no source in those scripts: nothing to count
        exclude = (
            copies.copier_exclusions(ref.tokens, doc_fold, sources)
            if sources.any()
            else (none, none)
        )
    lm = train_lm(ref.tokens, params.order, doc_fold, k, exclude)
    info: dict[str, Any] = {
        "reference_docs": int(has.sum()),
        "reference_tokens": int(toks.lengths.sum()),
        "reference_docs_per_script": per_script,
        "order": params.order,
        "folds": k,
        "ngrams": lm.num_ngrams,
        "discounts_fold0": [round(float(d), 4) for d in lm.discounts[:, 0]],
        **({"fold_routing": routing} if router is not None else {}),
        **({"reference_splices_left_out": int(spliced.sum())} if drop_splices else {}),
        **(
            {"copier_exclusions": len(exclude[0]), "copiers": len(np.unique(exclude[0]))}
            if exclude is not None
            else {}
        ),
    }
    return LMScorer(lm, {}, params, usable, info, router), ref


def fit_classifiers(
    sc: LMScorer,
    ref: Reference,
    ref_feats: np.ndarray | None,
    extra: tuple[list[str], np.ndarray] | None = None,
) -> None:
    """Train one coherence classifier per usable script into `sc`. `ref_feats`: the reference
    documents' features if already computed (self: the corpus pass), else computed here;
    `extra` = labelled texts (a seed set: 1 good, 0 bad)."""
    if ref_feats is None:
        fold, tok_fold = sc.folds(ref.tokens, ref.rows)
        ref_feats = doc_features(sc.lm, ref.tokens, fold, sc.params.feature_set, tok_fold)
    sc.info["classifiers"] = {}
    for s in sc.usable:
        clf, cinfo = _fit_script(s, ref, ref_feats, sc, extra)
        sc.classifiers[s] = clf
        sc.info["classifiers"][SCRIPTS[s]] = cinfo


def _weights_info(clf: Coherence, names: tuple[str, ...]) -> dict[str, Any]:
    """The report's view of a classifier: weights per feature and bias (per detector family
    when there are several)."""
    if clf.w.ndim == 1:
        ws = dict(zip(names, [round(float(w), 4) for w in clf.w], strict=True))
        return {"weights": ws, "bias": round(float(clf.b), 4)}
    fams = list(DETECTORS)[: len(clf.w)]
    return {
        "weights": {
            f: dict(zip(names, [round(float(x), 4) for x in w], strict=True))
            for f, w in zip(fams, clf.w, strict=True)
        },
        "bias": {f: round(float(b), 4) for f, b in zip(fams, clf.b, strict=True)},
    }


# quantiles of the negatives' logits where the junk among the positives is counted: low ones,
# where real text seldom scores (0.25-0.75 read short Chinese reviews as junk: real kept -1.2%)
MIXTURE_PROBES = (0.1, 0.25)
MAX_JUNK_SHARE = 0.5  # the mixture estimate never reads more than this of the positives as junk
# the mixture rule fails at most this much more of the positives than the quantile rule: an
# overestimate (real text that scores like corruptions: a detector that separates poorly) costs
# at most this share of real text per detector
MAX_EXTRA_FAIL = 0.03
MIN_MIXTURE_NEGATIVES = 50  # fewer negatives of the family: too few to read their lower tail


def detector_lift(
    pos: np.ndarray, neg: np.ndarray, keep: float, rule: str = "mixture"
) -> tuple[float, float]:
    """(how much to raise a detector's bias, the estimated junk share of the positives) from
    its logits on the positives (`pos`: reference documents) and on its family's negatives
    (`neg`: corruptions). "quantile": the bias passes `keep` of all positives, (-q, 0).

    "mixture": a `self` reference holds the corpus's own junk, and a Markov walk or a splice
    among the positives looks like the family's negatives. Raising the bias until `keep` of
    *all* positives pass lets that junk through: with 7% walks among the positives, a 98% rule
    passes most of them. The positives are read as a mixture, (1 - pi) real text and pi junk
    distributed as the negatives are; pi = the lowest, over t at the negatives' MIXTURE_PROBES
    quantiles, of F_pos(t) / F_neg(t) (real text seldom scores as low as the corruptions' lower
    tail, so this bounds the junk share from above; clipped to [0, MAX_JUNK_SHARE]). The bias
    then passes `keep` of the real part: the cut t* where
    F_pos(t*) = (1 - pi)(1 - keep) + pi F_neg(t*). With pi = 0 (no positive scores like the
    negatives) it is the quantile rule exactly; it never fails fewer positives than that rule,
    nor more than MAX_EXTRA_FAIL more of them, and with fewer than MIN_MIXTURE_NEGATIVES
    negatives it is the quantile rule."""
    if not len(pos):
        return 0.0, 0.0
    q = -float(np.quantile(pos, 1.0 - keep))
    if rule == "quantile" or len(neg) < MIN_MIXTURE_NEGATIVES:
        return q, 0.0
    ps, ns = np.sort(pos), np.sort(neg)

    def cdf(sorted_x: np.ndarray, t: np.ndarray) -> np.ndarray:
        return np.searchsorted(sorted_x, t, side="right") / len(sorted_x)

    probes = np.quantile(ns, MIXTURE_PROBES)
    pi = float(np.min(cdf(ps, probes) / np.maximum(cdf(ns, probes), 1e-12)))
    pi = min(max(pi, 0.0), MAX_JUNK_SHARE)
    if pi == 0.0:
        return q, 0.0
    target = (1.0 - pi) * (1.0 - keep)
    over = cdf(ps, ps) - pi * cdf(ns, ps) > target  # past the real part's (1 - keep) share
    i = int(np.argmax(over)) if over.any() else len(ps) - 1
    level = target + pi * float(cdf(ns, ps[i : i + 1])[0])
    level = min(max(level, 1.0 - keep), 1.0 - keep + MAX_EXTRA_FAIL)
    return -float(np.quantile(pos, level)), pi


def _detectors(
    X: list[np.ndarray],
    y: list[np.ndarray],
    neg_kinds: np.ndarray,
    keep: float,
    columns: dict[str, int] | None = None,
    lift_rule: str = "quantile",
) -> tuple[Coherence, dict[str, float]]:
    """(One logistic regression per DETECTORS family: all positives (X[0]) and any labelled
    extras (X[2:]) against the family's negatives (X[1] where neg_kinds is in the family),
    standardised by the statistics of all rows, {family: estimated junk share of the
    positives}). Each detector's bias is then raised, if need be, until `keep` (default
    DETECTOR_KEEP) of the positives score >= 0.5 by it (of the positives it estimates are
    real with `lift_rule` "mixture": detector_lift): a text must pass all of them, and a
    balanced fit alone drops ~5% of the positives per detector. `columns`: family -> how many
    leading feature columns its detector reads (0 weight on the rest; all by default)."""
    columns = columns or {}
    allx = np.vstack(X)
    mean, std = allx.mean(axis=0), allx.std(axis=0)
    std = np.where(std > 1e-9, std, 1.0)
    out, junk = [], {}
    for name, family in DETECTORS.items():
        sel = np.isin(neg_kinds, family)
        if not sel.any():
            continue
        xs = [X[0], X[1][sel], *X[2:]]
        ys = [y[0], y[1][sel], *y[2:]]
        cols = min(columns.get(name, allx.shape[1]), allx.shape[1])
        clf = train_coherence(
            np.vstack(xs)[:, :cols], np.concatenate(ys), scale=(mean[:cols], std[:cols])
        )
        if cols < allx.shape[1]:
            w = np.zeros(allx.shape[1])
            w[:cols] = clf.w
            clf = Coherence(mean, std, w, clf.b)
        logit = ((X[0] - mean) / std) @ clf.w + clf.b
        neg = ((X[1][sel] - mean) / std) @ clf.w + clf.b
        lift, junk[name] = detector_lift(logit, neg, keep, lift_rule)
        clf.b += max(lift, 0.0)
        out.append(clf)
    return stack_detectors(out), junk


def _fit_script(
    script: int,
    ref: Reference,
    ref_feats: np.ndarray,
    sc: LMScorer,
    extra: tuple[list[str], np.ndarray] | None,
) -> tuple[Coherence, dict[str, Any]]:
    """Positives: this script's reference documents (capped, seeded); negatives: one
    corruption of each, scored by the fold model of its source (which never saw the source),
    with folds: sentence each routed sentence by the model of the document it was copied from
    (a splice's sentences by models that never saw them)."""
    lm, params = sc.lm, sc.params
    names = FEATURE_SETS[params.feature_set]
    idx = np.flatnonzero(ref.tokens.script == script)
    rng = np.random.default_rng(params.seed + script)
    cap = max(params.max_train_docs // 2, 1)
    if len(idx) > cap:
        idx = np.sort(rng.choice(idx, cap, replace=False))
    v2 = params.feature_set >= 2
    train_kinds = TRAIN_KINDS if v2 else TRAIN_KINDS_V1
    held_out = HELD_OUT_KINDS if v2 else HELD_OUT_KINDS_V1
    bad, kinds = corrupt_tokens(
        ref.tokens.doc_slice(idx),
        train_kinds + held_out,
        params.seed,
        splice_sources=SPLICE_SOURCES if v2 else None,
        chain_docs=params.chain_docs if v2 and SCRIPTS[script] in GROUPED_CHAIN_SCRIPTS else 0,
    )
    fold, tok_fold = sc.folds(bad, ref.rows[idx])
    f_pos = ref_feats[idx]
    f_neg = doc_features(lm, bad, fold, params.feature_set, tok_fold)
    coherent = f_pos[:, 1] >= GAIN_FLOOR  # the positives: reference documents context helps
    if sc.router is not None:
        # and (folds: sentence) that are not stitched from other reference documents' sentences
        coherent &= sentence_partners(ref.tokens)[idx] <= POSITIVE_MAX_PARTNERS
    f_pos, f_neg, kinds = (
        f_pos[coherent],
        f_neg[coherent],
        [k for k, c in zip(kinds, coherent, strict=True) if c],
    )
    kinds_arr = np.array(kinds)
    train_neg = np.isin(kinds_arr, train_kinds)
    X = [f_pos, f_neg[train_neg]]
    y = [np.ones(len(f_pos)), np.zeros(int(train_neg.sum()))]
    n_extra = {"good": 0, "bad": 0}
    if extra is not None and extra[0]:
        etok = tokenize(extra[0], params.max_chars, params.feature_set in SURFACE_SETS)
        sel = np.flatnonzero((etok.script == script) & (etok.lengths > 0))
        if len(sel):
            zero = np.zeros(len(sel), np.int64)
            X.append(doc_features(lm, etok.doc_slice(sel), zero, params.feature_set))
            y.append(extra[1][sel].astype(np.float64))
            n_extra = {"good": int(extra[1][sel].sum()), "bad": int((extra[1][sel] == 0).sum())}
    junk_share: dict[str, float] | None = None
    if len(f_pos) < 2:  # no reference document of this script gains from context: gate only
        num = len(names)
        clf = Coherence(np.zeros(num), np.ones(num), np.zeros(num), 4.0)
    elif params.feature_set >= 2:
        cols = DETECTOR_COLUMNS.get(params.feature_set)
        clf, junk_share = _detectors(
            X, y, kinds_arr[train_neg], params.detector_keep, cols, params.detector_lift
        )
    else:
        clf = train_coherence(np.vstack(X), np.concatenate(y))
    p_pos = clf.predict(f_pos) * gain_gate(f_pos)
    p_neg = clf.predict(f_neg) * gain_gate(f_neg)
    auc = {}
    for kind in dict.fromkeys(kinds):
        sel = kinds_arr == kind
        both = np.concatenate([p_pos, p_neg[sel]])
        a = roc_auc(both, np.r_[np.ones(len(p_pos)), np.zeros(int(sel.sum()))])
        auc[kind] = None if a is None else round(a, 4)
    info = {
        "positives": int(len(f_pos)),
        "reference_docs_below_gain_floor": int((~coherent).sum()),
        "negatives": int(train_neg.sum()),
        **({"feature_set": params.feature_set} if v2 else {}),
        "negative_kinds": list(train_kinds),
        "held_out_kinds": list(held_out),
        "seed_set_docs": n_extra,
        **_weights_info(clf, names),
        "train_auc_per_kind": auc,
        "positives_kept_at_0.5": round(float((p_pos >= 0.5).mean()), 4) if len(p_pos) else None,
    }
    if junk_share is not None and params.detector_lift == "mixture":
        info["positives_junk_share"] = {k: round(v, 4) for k, v in junk_share.items()}
    return clf, info
