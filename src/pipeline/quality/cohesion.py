"""Sentence-scale cohesion features (feature set 2): how a document's sentences hang together.

A Markov walk over a corpus and sentences spliced from a few other documents are fluent inside
every n-gram window; what they lack is cohesion *between* sentences: real text repeats its
names and topic words in the next sentence or the one after (lexical cohesion, Halliday &
Hasan), and its topic drifts slowly. Units are content words in spaced scripts (tokens rarer
than CONTENT_FREQ in the reference) and, for unspaced scripts (Chinese, Japanese, Thai...), pairs
of adjacent characters rarer than CJK_CHAR_FREQ each (a word of two characters: names and
topic nouns; single characters are too common to carry a topic). Segments are sentences, cut
every SEGMENT_TOKENS tokens so a text without sentence marks still has segments. One lexsort of
the units per batch; no n-gram window, no pairwise loop. Pure functions of the token arrays.
"""

from __future__ import annotations

import numpy as np

from pipeline.quality.ngram import SCRIPTS, Tokens, token_hash

COHESION_NAMES = (
    "adjacent_link",
    "repeat_locality",
    "unit_repeat",
    "boundary_gain",
    "unit_density",
)
CONTENT_FREQ = 1e-3  # a spaced-script token rarer than this (share of reference tokens) is content
CJK_CHAR_FREQ = 3e-3  # an unspaced character rarer than this may start or end a content pair
SEGMENT_TOKENS = 40  # a sentence longer than this is cut into segments of this many tokens
LINK_GAP = 2  # adjacent_link: a unit seen 1..LINK_GAP segments back links the segment
_CJK = SCRIPTS.index("cjk")
_ZERO = token_hash("0")  # every number's id (digits fold to 0)


def cohesion_features(
    tokens: Tokens,
    log_uni: np.ndarray,
    gain: np.ndarray,
    doc: np.ndarray,
    starts: np.ndarray,
    is_end: np.ndarray,
) -> np.ndarray:
    """float64 [n, len(COHESION_NAMES)] for the documents of `tokens`; `log_uni` = ln P(token)
    under the reference unigram model, `gain` = ln P(w | context) − ln P(w), `doc` the document
    of each token, `starts` each document's first token, `is_end` the sentence-end tokens (all
    [T] but starts, [n]). Columns:

    - adjacent_link: share of segments after the first that repeat a unit of one of the
      LINK_GAP segments before them (splices of k documents: ~1/k; real prose: most);
    - repeat_locality: among units repeated from an earlier segment, the share whose last
      occurrence is at most LINK_GAP segments back, minus that share for segments in a random
      order (0: no sentence order, as in shuffled splices and Markov walks);
    - unit_repeat: share of unit occurrences whose unit occurred in an earlier segment;
    - boundary_gain: mean context gain of a sentence's first token minus the document's mean
      gain (the LM sees across the boundary: the words before come from another text in a splice);
    - unit_density: units per token (a rare-word share: Markov text over a corpus keeps it, salad
      of common words lowers it; lets the classifier weigh the link features by how many units).
    Documents with fewer than 2 segments get 0 for the segment features."""
    n = len(tokens.lengths)
    out = np.zeros((n, len(COHESION_NAMES)))
    if len(tokens.ids) == 0:
        return out
    seg, bound, seg_doc, num_seg = _doc_segments(tokens, doc, starts, is_end)

    unit, at = _units(tokens, log_uni, doc, is_end)
    num_units = np.bincount(doc[at], minlength=n).astype(np.float64)
    out[:, 4] = num_units / np.maximum(tokens.lengths, 1)
    if len(unit):
        d, s, same, gap = _repeats(doc[at], seg[at], unit, in_order=True)
        back = gap >= 1  # repeated from an earlier segment
        near = back & (gap <= LINK_GAP)
        linked = np.zeros(int(seg[-1]) + 1, bool)
        linked[s[near]] = True
        num_linked = np.bincount(seg_doc, weights=linked[: len(seg_doc)], minlength=n)
        multi = num_seg >= 2
        out[:, 0] = np.where(multi, num_linked / np.maximum(num_seg - 1, 1), 0.0)
        num_back = np.bincount(d[back], minlength=n).astype(np.float64)
        num_near = np.bincount(d[near], minlength=n).astype(np.float64)
        m = num_seg.astype(np.float64)
        # ordered pairs of distinct segments 1..LINK_GAP apart, over all ordered pairs
        close = sum(np.maximum(m - g, 0.0) for g in range(1, LINK_GAP + 1))
        expected = np.where(multi, close / np.maximum(m * (m - 1) / 2, 1.0), 0.0)
        ok = multi & (num_back > 0)
        out[:, 1] = np.where(ok, num_near / np.maximum(num_back, 1) - expected, 0.0)
        out[:, 2] = num_back / np.maximum(num_units, 1.0)
    # the first token of each sentence but the document's first: context from the sentence before
    num_b = np.bincount(doc[bound], minlength=n).astype(np.float64)
    g_b = np.bincount(doc[bound], weights=gain[bound], minlength=n)
    g_all = np.bincount(doc, weights=gain, minlength=n) / np.maximum(tokens.lengths, 1)
    out[:, 3] = np.where(num_b > 0, g_b / np.maximum(num_b, 1) - g_all, 0.0)
    out[tokens.lengths == 0] = 0.0
    return out


def _repeats(
    d: np.ndarray, s: np.ndarray, key: np.ndarray, in_order: bool = False
) -> tuple[np.ndarray, ...]:
    """Occurrences (document d, segment s, key) sorted by (document, key, segment): their d and
    s in that order, `same` (the occurrence before is the same key in the same document) and
    `gap` (segments since that one; -1 where not `same`). `in_order`: the occurrences come
    in (document, segment) order within each document and documents ascend (`_units`' output:
    a document's units are all words or all pairs), so one stable sort by key puts every
    (document, key) together with its segments ascending, the groups ordered by key then
    document: the same groups and gaps (callers count them, in any order) for half the time
    of a 3-key lexsort."""
    order = np.argsort(key, kind="stable") if in_order else np.lexsort((s, key, d))
    d, u, s = d[order], key[order], s[order]
    same = np.zeros(len(u), bool)
    same[1:] = (u[1:] == u[:-1]) & (d[1:] == d[:-1])
    gap = np.zeros(len(u), np.int64)
    gap[1:] = s[1:] - s[:-1]
    gap[~same] = -1
    return d, s, same, gap


def _units(
    tokens: Tokens, log_uni: np.ndarray, doc: np.ndarray, is_end: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(unit keys uint64 [U], token position of each [U]): content words in spaced-script
    documents, pairs of rare adjacent characters in unspaced ones (keyed by both hashes)."""
    cjk_doc = tokens.script[doc] == _CJK
    word = ~cjk_doc & (log_uni < np.log(CONTENT_FREQ)) & ~is_end
    rare = cjk_doc & (log_uni < np.log(CJK_CHAR_FREQ)) & ~is_end
    pair = np.zeros(len(doc), bool)
    pair[:-1] = rare[:-1] & rare[1:] & (doc[:-1] == doc[1:])
    at_w = np.flatnonzero(word)
    at_p = np.flatnonzero(pair)
    with np.errstate(over="ignore"):
        keys_p = tokens.ids[at_p] * np.uint64(0x9E3779B97F4A7C15) ^ tokens.ids[at_p + 1]
    at = np.concatenate([at_w, at_p])
    keys = np.concatenate([tokens.ids[at_w], keys_p])
    return keys, at


# Feature set 3 (`quality.coherence_features: 3`): set 2 + how the LM's per-segment score moves
# across the document. Real text keeps one register; sentences spliced from several documents
# jump between registers at the seams, and a Markov walk's segments are uniformly middling.
COHESION_NAMES_V3 = ("segment_gain_std", "seam_gain_jump")


def _segments(tokens: Tokens, starts: np.ndarray, is_end: np.ndarray):
    """(new_seg, seg, bound) over every token: new_seg marks a segment's first token, seg is the
    global segment id (contiguous per document), bound marks each sentence's first token but the
    document's first. A segment is a sentence, cut every SEGMENT_TOKENS tokens."""
    total = len(tokens.ids)
    idx = np.arange(total, dtype=np.int64)
    first = np.zeros(total, bool)
    first[starts[tokens.lengths > 0]] = True
    # a sentence starts at a document's first token and after every sentence end
    sent_start = first.copy()
    sent_start[1:] |= is_end[:-1] & ~first[1:]
    start_at = np.maximum.accumulate(np.where(sent_start, idx, 0))
    new_seg = sent_start | ((idx - start_at) % SEGMENT_TOKENS == 0)
    return new_seg, np.cumsum(new_seg) - 1, sent_start & ~first


def _doc_segments(tokens: Tokens, doc: np.ndarray, starts: np.ndarray, is_end: np.ndarray):
    """(seg, bound, seg_doc, num_seg): _segments' segment id of every token and sentence
    bounds, each segment's document (segments are contiguous per document, and a document with
    tokens starts one) and the segments per document (int64 [n], 0 without tokens)."""
    new_seg, seg, bound = _segments(tokens, starts, is_end)
    seg_doc = doc[new_seg]
    return seg, bound, seg_doc, np.bincount(seg_doc, minlength=len(tokens.lengths))


def segment_features(
    tokens: Tokens, gain: np.ndarray, doc: np.ndarray, starts: np.ndarray, is_end: np.ndarray
) -> np.ndarray:
    """float64 [n, len(COHESION_NAMES_V3)], segments as in cohesion_features. Columns:

    - segment_gain_std: standard deviation over a document's segments of their mean context
      gain (per-sentence LM score variance);
    - seam_gain_jump: mean absolute change of the segment mean gain from one segment to the
      next, divided by segment_gain_std + 0.1 (a splice changes at its seams, real text drifts).
    Documents with fewer than 2 segments get 0."""
    n = len(tokens.lengths)
    out = np.zeros((n, len(COHESION_NAMES_V3)))
    if len(tokens.ids) == 0:
        return out
    seg, _, seg_doc, num_seg = _doc_segments(tokens, doc, starts, is_end)
    num_seg = num_seg.astype(np.float64)
    num = int(seg[-1]) + 1
    cnt = np.bincount(seg, minlength=num).astype(np.float64)
    m = np.bincount(seg, weights=gain, minlength=num) / np.maximum(cnt, 1.0)
    mean = np.bincount(seg_doc, weights=m, minlength=n) / np.maximum(num_seg, 1.0)
    var = np.bincount(seg_doc, weights=(m - mean[seg_doc]) ** 2, minlength=n)
    std = np.sqrt(var / np.maximum(num_seg, 1.0))
    same = seg_doc[1:] == seg_doc[:-1]
    jump = np.bincount(seg_doc[1:][same], weights=np.abs(np.diff(m))[same], minlength=n)
    multi = num_seg >= 2
    out[:, 0] = np.where(multi, std, 0.0)
    out[:, 1] = np.where(multi, jump / np.maximum(num_seg - 1, 1.0) / (std + 0.1), 0.0)
    out[tokens.lengths == 0] = 0.0
    return out


# Feature set 4 (`quality.coherence_features: 4`): set 2 + entity and number consistency from
# the raw surface (Tokens.surface: capitals and digits survive) and sentence clusters.
# A page stitched from a few documents brings each one's names and numbers and drops them
# again; real text keeps its cast and its figures from one sentence to the next. (Tried and
# dropped: a segment's link to the one before minus its link to the one 3 back, over entities
# or content words: univariate AUC 0.27-0.61 on the quick sets, nothing in a fit.)
ENTITY_NAMES = (
    "entity_density",
    "entity_repeat",
    "entity_link",
    "entity_cluster",
    "unit_cluster",
)
CJK_PAIR_FREQ = 1e-2  # set 4, unspaced scripts: an entity pair has one rare character, both < this


def entity_features(
    tokens: Tokens, log_uni: np.ndarray, doc: np.ndarray, starts: np.ndarray, is_end: np.ndarray
) -> np.ndarray:
    """float64 [n, len(ENTITY_NAMES)], segments as in cohesion_features. Entities: in spaced
    scripts, tokens that start with a capital letter anywhere but at a sentence start (names)
    and numbers other than 0, keyed by their surface (the digits themselves); in unspaced
    scripts, adjacent character pairs with one character rarer than CJK_CHAR_FREQ and both
    rarer than CJK_PAIR_FREQ (names, terms). Without `tokens.surface` there are no spaced-script
    entities. Columns:

    - entity_density: entities per token;
    - entity_repeat: share of entity occurrences whose entity occurred in an earlier segment;
    - entity_link: among segments after the first that hold an entity, the share that repeat
      one of the LINK_GAP segments before them;
    - entity_cluster / unit_cluster: the largest set of segments connected by shared entities
      (entities and cohesion units), as a share of the segments that hold one (0 under 2): a
      page spliced from k documents falls apart into about k clusters whatever its order.
    Documents with fewer than 2 segments get 0 for all but entity_density."""
    n = len(tokens.lengths)
    out = np.zeros((n, len(ENTITY_NAMES)))
    if len(tokens.ids) == 0:
        return out
    seg, bound, seg_doc, num_seg = _doc_segments(tokens, doc, starts, is_end)
    first_seg = np.concatenate([[0], np.cumsum(num_seg)])[:-1]
    local = np.arange(len(seg_doc), dtype=np.int64) - first_seg[seg_doc]
    key, at = _entities(tokens, log_uni, doc, starts, is_end, bound)
    out[:, 0] = np.bincount(doc[at], minlength=n) / np.maximum(tokens.lengths, 1)
    multi = num_seg >= 2
    if len(key):
        d, s, same, gap = _repeats(doc[at], seg[at], key)
        back = gap >= 1
        rep = np.bincount(d[back], minlength=n) / np.maximum(np.bincount(d, minlength=n), 1)
        out[:, 1] = np.where(multi, rep, 0.0)
        has = np.zeros(len(seg_doc), bool)
        has[s] = True
        has &= local >= 1
        linked = np.zeros(len(seg_doc), bool)
        linked[s[back & (gap <= LINK_GAP)]] = True
        num_has = np.bincount(seg_doc[has], minlength=n)
        num_link = np.bincount(seg_doc[has & linked], minlength=n)
        out[:, 2] = np.where(num_has > 0, num_link / np.maximum(num_has, 1), 0.0)
        out[:, 3] = _largest_cluster(same, s, seg_doc, num_seg)
    ukey, uat = _units(tokens, log_uni, doc, is_end)
    if len(ukey):
        both_k = np.concatenate([ukey, key ^ np.uint64(0x94D049BB133111EB)])
        both_at = np.concatenate([uat, at])
        d, s = doc[both_at], seg[both_at]
        order = np.lexsort((s, both_k, d))
        d, u, s = d[order], both_k[order], s[order]
        same = np.zeros(len(u), bool)
        same[1:] = (u[1:] == u[:-1]) & (d[1:] == d[:-1])
        out[:, 4] = _largest_cluster(same, s, seg_doc, num_seg)
    out[:, 3:5] *= multi[:, None]
    out[tokens.lengths == 0] = 0.0
    return out


def _entities(
    tokens: Tokens,
    log_uni: np.ndarray,
    doc: np.ndarray,
    starts: np.ndarray,
    is_end: np.ndarray,
    bound: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """(entity keys uint64 [E], token position of each [E]); see entity_features."""
    cjk_doc = tokens.script[doc] == _CJK
    ent = np.zeros(len(doc), bool)
    if tokens.surface is not None:
        sent_start = bound.copy()
        sent_start[starts[tokens.lengths > 0]] = True
        marked = (tokens.surface != tokens.ids) & ~is_end
        is_num = tokens.ids == _ZERO
        ent = ~cjk_doc & marked & (is_num | ~sent_start)
    rare = cjk_doc & (log_uni < np.log(CJK_CHAR_FREQ)) & ~is_end
    ok = cjk_doc & (log_uni < np.log(CJK_PAIR_FREQ)) & ~is_end
    pair = np.zeros(len(doc), bool)
    pair[:-1] = (rare[:-1] | rare[1:]) & ok[:-1] & ok[1:] & (doc[:-1] == doc[1:])
    at_e = np.flatnonzero(ent)
    at_p = np.flatnonzero(pair)
    with np.errstate(over="ignore"):
        keys_p = tokens.ids[at_p] * np.uint64(0x9E3779B97F4A7C15) ^ tokens.ids[at_p + 1]
    surf = tokens.surface if tokens.surface is not None else tokens.ids
    return np.concatenate([surf[at_e], keys_p]), np.concatenate([at_e, at_p])


CLUSTER_ROUNDS = 64  # label propagation rounds (with pointer jumping: enough for any page)


def _largest_cluster(
    same: np.ndarray, s: np.ndarray, seg_doc: np.ndarray, num_seg: np.ndarray
) -> np.ndarray:
    """float64 [n]: per document, the largest connected set of its segments (linked when they
    share a unit) over the number of its segments that hold a unit (0 when fewer than 2 do).
    `s` = the units' segments sorted by (document, unit, segment), `same` = an entry has the
    unit of the one before (same document): each unit links its consecutive occurrences.
    Min-label propagation with pointer jumping, at most CLUSTER_ROUNDS rounds (deterministic;
    a chain that needs more, thousands of segments long, stops there)."""
    n = len(num_seg)
    edge = same & (s != np.roll(s, 1))
    a, b = s[np.flatnonzero(edge) - 1], s[edge]
    lab = np.arange(len(seg_doc), dtype=np.int64)
    for _ in range(CLUSTER_ROUNDS):
        m = np.minimum(lab[a], lab[b])
        new = lab.copy()
        np.minimum.at(new, a, m)
        np.minimum.at(new, b, m)
        new = new[new]
        if np.array_equal(new, lab):
            break
        lab = new
    has = np.zeros(len(lab), bool)
    has[s] = True  # segments that hold a unit: the others are no evidence either way
    size = np.bincount(lab[has], minlength=len(lab))[lab]
    big = np.zeros(n, np.int64)
    np.maximum.at(big, seg_doc[has], size[has])
    num = np.bincount(seg_doc[has], minlength=n)
    return np.where(num >= 2, big / np.maximum(num, 1), 0.0)
