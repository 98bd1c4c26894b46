"""A word-level n-gram language model with hashed counts and interpolated Kneser-Ney smoothing.

Tokens (see `tokenize`): lowercased word-character runs (all-digit runs fold to "0"), single
punctuation marks, and single characters for scripts written without spaces (Han, Kana, Thai,
Lao, Khmer, Myanmar), so Chinese is modelled by characters, not one token per sentence. A token is
an xxh64 hash; an n-gram is a splitmix64 chain of its token hashes (keys are 64-bit, never
truncated: a collision is ~n²/2^65, none in practice). Each order keeps sorted uint64 keys with
uint32 counts, looked up by binary search. Documents are padded with order-1 `<s>` tokens so
every token has a full context; no n-gram crosses a document.

Smoothing (Chen & Goodman 1998, interpolated KN with one discount per order, the KenLM formula
D = n1 / (n1 + 2 n2) from counts-of-counts, 0.5 when n1 or n2 is 0):

    P_k(w | h) = max(c_k(h w) - D_k, 0) / c_k(h •) + D_k · N1+(h •) / c_k(h •) · P_{k-1}(w | h')

c_N is the raw count at the top order; lower orders use continuation counts (the number of
distinct words seen before the n-gram). An unseen context h passes P_{k-1} through unchanged.
P_1 interpolates with a uniform distribution over the seen words plus one unknown word. The
model also keeps raw unigram frequencies (add-1/2), the baseline of the context gain.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

import numpy as np
import xxhash

from pipeline.hashing import GOLDEN64
from pipeline.permute import mix64
from pipeline.quality import segment

TOKENIZER_VERSION = "ngram-tok-v1"  # bump when `tokenize` changes: saved models record it
_CHAR_SCRIPTS = segment.CHAR_SCRIPTS
_TOKEN = re.compile(rf"[{_CHAR_SCRIPTS}]|[^\W{_CHAR_SCRIPTS}]+|[^\w\s]")
_TOKEN_SPACED = re.compile(r"\w+|[^\w\s]")  # the same tokens for text without those scripts
_CHAR_SCRIPT_CHAR = re.compile(rf"[{_CHAR_SCRIPTS}]")
BOS = np.uint64(0x5A17_0B05_0000_0001)  # hash of `<s>`: not an xxh64 of any string we emit
SCRIPTS = ("latin", "cyrillic", "cjk", "other")  # script groups a document is assigned to


def char_script_share(text: str, window: int = 2000) -> float:
    """Share of the first `window` non-space characters that belong to scripts written without
    spaces (Chinese, Japanese, Thai, ...): word statistics do not apply to such text."""
    head = "".join(text[:window].split())
    return len(_CHAR_SCRIPT_CHAR.findall(head)) / len(head) if head else 0.0


def token_hash(token: str) -> np.uint64:
    """The hash `tokenize` gives a (lowercased) token."""
    word = "0" if token.isdigit() else token
    return np.uint64(xxhash.xxh64_intdigest(word.encode("utf-8", "surrogatepass")))


def _script_of(token: str) -> int:
    """Index into SCRIPTS of a token's first character; -1 for digits and punctuation."""
    c = ord(token[0])
    if not token[0].isalpha():
        return -1
    if c < 0x250:
        return 0
    if 0x400 <= c < 0x530:
        return 1
    if 0x3040 <= c < 0x3100 or 0x3400 <= c < 0xA000 or 0xF900 <= c < 0xFB00:
        return 2
    return 3


def _scripts_of(cp: np.ndarray, f: np.ndarray) -> np.ndarray:
    """`_script_of` of tokens from their first characters' code points and class bits."""
    c = cp.astype(np.int64)
    cjk = (
        ((c >= 0x3040) & (c < 0x3100))
        | ((c >= 0x3400) & (c < 0xA000))
        | ((c >= 0xF900) & (c < 0xFB00))
    )
    out = np.where(c < 0x250, 0, np.where((c >= 0x400) & (c < 0x530), 1, np.where(cjk, 2, 3)))
    return np.where((f & segment.ALPHA) > 0, out, -1)


@dataclass
class Tokens:
    """Hashed tokens of a batch of documents, concatenated without padding."""

    ids: np.ndarray  # uint64 [T]: token hashes
    lengths: np.ndarray  # int64 [n]: tokens per document
    script: np.ndarray  # int8 [n]: index into SCRIPTS of the document's commonest letter script
    # uint64 [T] or None (tokenize(surface=True)): each token's hash with what lowercasing and
    # digit folding dropped: `ids` where nothing was, else a hash of the digits / a capitalised
    # mark (quality.coherence_features 4: entity and number consistency)
    surface: np.ndarray | None = None

    def doc_slice(self, docs: np.ndarray) -> Tokens:
        """The tokens of the given documents (int64 indices), in that order."""
        starts = np.concatenate([[0], np.cumsum(self.lengths)])[:-1]
        lens = self.lengths[docs]
        offs = np.concatenate([[0], np.cumsum(lens)])
        pos = np.repeat(starts[docs] - offs[:-1], lens) + np.arange(offs[-1], dtype=np.int64)
        surf = None if self.surface is None else self.surface[pos]
        return Tokens(self.ids[pos], lens.astype(np.int64), self.script[docs], surf)

    def slice(self, i: int, j: int, a: int, b: int) -> Tokens:
        """Documents [i, j), whose tokens are [a, b)."""
        surf = None if self.surface is None else self.surface[a:b]
        return Tokens(self.ids[a:b], self.lengths[i:j], self.script[i:j], surf)


def tokenize(texts: list[str], max_chars: int, surface: bool = False) -> Tokens:
    """Tokens of each text's first `max_chars` characters, lowercased: runs of word characters
    outside the unspaced scripts, each unspaced-script character, each other non-space
    character (what `_TOKEN` finds). One numpy pass over the batch (pipeline.quality.segment);
    distinct tokens are hashed once per pass. Batches of more than TOKENIZE_CHARS characters go
    in passes of whole texts of about that many (the per-character arrays stay in cache).
    `surface`: also Tokens.surface (the ids do not change)."""
    cut = [t[:max_chars] for t in texts]
    ends = np.cumsum(np.fromiter(map(len, cut), np.int64, len(cut)))
    if len(cut) < 2 or ends[-1] <= TOKENIZE_CHARS:
        return _tokenize_pass(cut, surface)
    out, i = [], 0
    while i < len(cut):  # [i, j): whole texts, at least one
        j = int(np.searchsorted(ends, ends[i] - len(cut[i]) + TOKENIZE_CHARS, side="right"))
        out.append(_tokenize_pass(cut[i : max(j, i + 1)], surface))
        i = max(j, i + 1)
    cat = np.concatenate
    return Tokens(
        cat([t.ids for t in out]),
        cat([t.lengths for t in out]),
        cat([t.script for t in out]),
        cat([t.surface for t in out]) if surface else None,
    )


TOKENIZE_CHARS = 1 << 20  # characters per tokenize pass (~18% less CPU than 4 MB at once)


CAPITAL_SALT = np.uint64(0xC3A5C85C97CB3127)  # Tokens.surface of a capitalised token


def _tokenize_pass(texts: list[str], surface: bool = False) -> Tokens:
    lower = [t.lower() for t in texts]
    big, cps, starts = segment.join(lower)
    f = segment.classes(cps)
    script_char = (f & segment.CHAR_SCRIPT) > 0
    word = ((f & segment.WORD) > 0) & ~script_char
    single = script_char | ((f & (segment.WORD | segment.SPACE)) == 0)
    tok_start, tok_end = segment.runs(word, single)
    lengths = np.diff(np.searchsorted(tok_start, starts))
    fp = segment.fingerprints(cps, tok_start, tok_end)
    rep, ids = _distinct(fp)
    digest = xxhash.xxh64_intdigest
    if surface:
        spans = zip(tok_start[rep].tolist(), tok_end[rep].tolist(), strict=True)
        vocab = [big[a:b] for a, b in spans]
        hashes = _token_hashes(vocab)
    else:
        hashes = _HASHES.get(fp[rep], big, tok_start[rep], tok_end[rep])
    first = tok_start[rep]
    scripts = _scripts_of(cps[first], f[first])
    doc = np.repeat(np.arange(len(texts), dtype=np.int64), lengths)
    tok_script = scripts[ids]
    letter = tok_script >= 0
    counts = np.bincount(
        doc[letter] * len(SCRIPTS) + tok_script[letter], minlength=len(texts) * len(SCRIPTS)
    ).reshape(len(texts), len(SCRIPTS))
    surf = None
    if surface:
        # the raw digits of a number; a capital first letter (texts whose lowercasing keeps
        # their length, i.e. every character's position: nearly all) mixes in CAPITAL_SALT
        raw = hashes.copy()
        digit = np.fromiter(map(str.isdigit, vocab), bool, count=len(vocab))
        for k in np.flatnonzero(digit).tolist():
            raw[k] = digest(vocab[k].encode("utf-8", "surrogatepass"))
        surf = raw[ids]
        same = [t if len(t) == len(lo) else lo for t, lo in zip(texts, lower, strict=True)]
        _, ocps, _ = segment.join(same)
        cap = ocps[tok_start] != cps[tok_start]
        with np.errstate(over="ignore"):
            surf[cap] = mix64(surf[cap] ^ CAPITAL_SALT, inplace=True)
    return Tokens(hashes[ids], lengths, counts.argmax(axis=1).astype(np.int8), surf)


def _token_hashes(words: list[str]) -> np.ndarray:
    """uint64 [len(words)]: `token_hash` of each word (digit runs fold to "0": numbers are free
    to vary without looking like unseen words)."""
    digest = xxhash.xxh64_intdigest
    return np.fromiter(
        (digest(("0" if w.isdigit() else w).encode("utf-8", "surrogatepass")) for w in words),
        np.uint64,
        count=len(words),
    )


class _HashCache:
    """Token hashes by run fingerprint (segment.fingerprints: equal runs share one; distinct
    ones collide with probability ~2^-64 a pair), kept across tokenize passes in this process:
    a batch's vocabulary is mostly words earlier batches had, and a vectorised lookup of their
    hashes costs less than slicing each word out and hashing it again (~0.9 s of a 40 MB
    quality stage). Sorted fingerprints with their hashes; at most MAX entries (later words
    are hashed each time). The hashes are the same either way: only the work changes."""

    MAX = 1 << 20

    def __init__(self) -> None:
        self.keys = np.zeros(0, np.uint64)
        self.values = np.zeros(0, np.uint64)

    def get(self, fps: np.ndarray, big: str, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
        """Hashes of the distinct runs with fingerprints `fps`, big[starts[i]:ends[i]]."""
        pos = np.searchsorted(self.keys, fps)
        np.minimum(pos, max(len(self.keys) - 1, 0), out=pos)
        hit = self.keys[pos] == fps if len(self.keys) else np.zeros(len(fps), bool)
        out = np.empty(len(fps), np.uint64)
        out[hit] = self.values[pos[hit]]
        miss = np.flatnonzero(~hit)
        words = [big[a:b] for a, b in zip(starts[miss].tolist(), ends[miss].tolist(), strict=True)]
        out[miss] = _token_hashes(words)
        room = self.MAX - len(self.keys)
        if room > 0 and len(miss):
            new = miss[:room]
            order = np.argsort(fps[new])
            k, v = fps[new][order], out[new][order]
            at = np.searchsorted(self.keys, k)
            self.keys = np.insert(self.keys, at, k)
            self.values = np.insert(self.values, at, v)
        return out


_HASHES = _HashCache()


def _distinct(fp: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(one index of each distinct value, the group of every element int64 [R]). A plain sort
    (numpy's SIMD sort of uint64 is ~30x its argsort) and a probe of the distinct values (the
    batch's vocabulary: they fit in cache)."""
    s = np.sort(fp)
    new = np.concatenate([[True], s[1:] != s[:-1]]) if len(s) else np.zeros(0, bool)
    gid = HashTable.build(s[new]).find(fp)
    rep = np.empty(int(new.sum()), np.int64)
    rep[gid] = np.arange(len(fp), dtype=np.int64)  # some occurrence of each value
    return rep, gid


def tokenize_regex(texts: list[str], max_chars: int) -> Tokens:
    """`tokenize` by one regex findall per text: the definition `tokenize` is checked against
    (tests) and the before of the quality speed benchmark."""
    toks: list[str] = []
    lengths = np.zeros(len(texts), np.int64)
    for i, text in enumerate(texts):
        text = text[:max_chars].lower()
        found = (_TOKEN if _CHAR_SCRIPT_CHAR.search(text) else _TOKEN_SPACED).findall(text)
        lengths[i] = len(found)
        toks.extend(found)
    vocab = {w: i for i, w in enumerate(dict.fromkeys(toks))}
    ids = np.fromiter(map(vocab.__getitem__, toks), np.int64, count=len(toks))
    hashes = np.fromiter(map(token_hash, vocab), np.uint64, count=len(vocab))
    scripts = np.fromiter(map(_script_of, vocab), np.int64, count=len(vocab))
    doc = np.repeat(np.arange(len(texts), dtype=np.int64), lengths)
    tok_script = scripts[ids]
    letter = tok_script >= 0
    counts = np.bincount(
        doc[letter] * len(SCRIPTS) + tok_script[letter], minlength=len(texts) * len(SCRIPTS)
    ).reshape(len(texts), len(SCRIPTS))
    return Tokens(hashes[ids], lengths, counts.argmax(axis=1).astype(np.int8))


@dataclass
class _Grams:
    """Chain hashes of every order at every padded position, and which positions are tokens."""

    h: list[np.ndarray]  # h[k-1]: uint64 [P] hash of the k tokens ending at each position
    target: np.ndarray  # int64 [T]: padded positions of the real tokens, in document order


def _grams(tokens: Tokens, order: int) -> _Grams:
    pad = order - 1
    padded_len = tokens.lengths + pad
    size = int(padded_len.sum())
    starts = np.concatenate([[0], np.cumsum(padded_len)])[:-1]
    is_tok = np.ones(size, bool)
    for j in range(pad):
        is_tok[starts + j] = False
    target = np.flatnonzero(is_tok)
    h1 = np.full(size, BOS, np.uint64)
    h1[target] = tokens.ids
    hs = [h1]
    for _ in range(1, order):  # position i: hash of (k-1 tokens ending at i-1) then token i
        prev = hs[-1]
        nxt = np.empty_like(prev)
        with np.errstate(over="ignore"):
            nxt[1:] = mix64(prev[:-1] * GOLDEN64 ^ h1[1:], inplace=True)
        nxt[0] = h1[0]
        hs.append(nxt)
    return _Grams(hs, target)


def _discounts(values: np.ndarray) -> np.ndarray:
    """KenLM's D = n1 / (n1 + 2 n2) per fold column of a [G, K] count matrix; 0.5 when n1 or
    n2 is 0, clipped to [0.05, 0.95]."""
    n1 = (values == 1).sum(axis=0).astype(np.float64)
    n2 = (values == 2).sum(axis=0).astype(np.float64)
    ok = (n1 > 0) & (n2 > 0)
    d = np.where(ok, n1 / np.maximum(n1 + 2 * n2, 1.0), 0.5)
    return np.clip(d, 0.05, 0.95)


@dataclass
class NgramLM:
    """Interpolated Kneser-Ney n-gram models for K folds in one structure: model f counts every
    reference document outside fold f. Per order k (list index k-1): a table of the n-grams
    seen in any fold and a [G, K] matrix of (continuation) counts, 0 where model f did not see
    the n-gram; per order k >= 2 (index k-2): a table of contexts with [C, K] count totals and
    numbers of distinct followers. K = 1 is a plain model."""

    order: int
    tables: list[HashTable]
    values: list[np.ndarray]  # float32 [G_k, K]: count (top order) or continuation count
    ctx_tables: list[HashTable]
    ctx_total: list[np.ndarray]  # float32 [C_k, K]
    ctx_types: list[np.ndarray]  # float32 [C_k, K]
    discounts: np.ndarray  # float64 [order, K]
    uni_counts: np.ndarray  # float32 [G_1, K], rows as values[0]: raw counts (gain baseline)

    @property
    def num_folds(self) -> int:
        return int(self.values[0].shape[1])

    @property
    def num_ngrams(self) -> int:
        """Distinct n-grams of all orders over all folds."""
        return int(sum(len(v) for v in self.values))

    def log_probs(
        self, tokens: Tokens, fold: np.ndarray, token_fold: np.ndarray | None = None
    ) -> tuple[np.ndarray, ...]:
        """Per token (in document order), scored by the model of its document's fold (int [n]),
        or of its own fold where `token_fold` (int [T]) is given (the whole n-gram and its
        context are looked up in the token's model):
        ln P_KN(w | context), ln P_unigram(w), the highest order whose n-gram that model saw
        (int8, 0: unseen word), the word's raw count in that model (float32) and ln P_KN(w |
        previous word) (the bigram level, for the gain of longer contexts). Each [T].

        Computed at every padded position (a pad's value is unused), so that a token's context,
        the n-gram ending one position earlier, is a shifted view: one lookup per order and
        position (`_levels`: an order's n-grams and the next order's contexts share a table)
        and one gather of the (row, fold)'s values, from a flat table whose last row is zeros
        (absent)."""
        levels = self._levels
        k_folds = np.int64(self.num_folds)
        g = _grams(tokens, self.order)
        col_all = np.repeat(fold.astype(np.int64), tokens.lengths + (self.order - 1))
        if token_fold is not None:
            col_all[g.target] = token_fold
        # per order, the flat (row, fold) index of every padded position (1D gathers: numpy's
        # 2-D fancy indexing is several times slower)
        at = [
            lv.table.rows(h).astype(np.int64) * k_folds + col_all
            for lv, h in zip(levels, g.h, strict=True)
        ]
        col = col_all[1:]  # from here on, positions 1.. (position 0 is a pad)
        # one gather per order of the (row, fold)'s record: [count, total, types, uni] (16
        # bytes, one cache line; three 4-byte gathers cost twice one 16-byte gather); order
        # n's count is read at the position, its context fields one position later
        recs = [lv.record[a] for lv, a in zip(levels, at, strict=True)]
        # a context is the (k-1)-gram one position earlier, gathered in *this* token's model:
        # with per-token folds the earlier position's fold can differ (a sentence seam)
        shift = None if token_fold is None else col - col_all[:-1]
        lv1 = levels[0]
        c1 = _field(recs[0], 0)[1:]
        total1, types1, _ = (x[col] for x in lv1.fold_consts)
        d = self.discounts[0][col]
        p = (np.maximum(c1 - d, 0.0) + d * types1 / (types1 + 1.0)) / np.maximum(total1, 1.0)
        hit = (c1 > 0).astype(np.int8)
        for k in range(2, self.order + 1):
            # the (k-1)-gram one position earlier
            if shift is None:
                ctx = recs[k - 2][:-1]
            else:
                ctx = levels[k - 2].record[at[k - 2][:-1] + shift]
            den = _field(ctx, 1)
            found = den > 0  # a context only fold f saw is unseen for model f
            den = np.where(found, den, np.float32(1.0))
            typ = _field(ctx, 2)  # 0 where the context is unseen for the fold
            c = _field(recs[k - 1], 0)[1:]
            dk = self.discounts[k - 1][col]
            # p = where(found, max(c - dk, 0) / den + dk * typ / den * p, p), in place
            q = c - dk
            np.maximum(q, 0.0, out=q)
            q /= den
            r = dk * typ
            r /= den
            r *= p
            q += r
            if k <= 3:  # new arrays: p2 keeps the bigram level
                p = np.where(found, q, p)
                if k == 2:
                    p2 = p
            else:
                np.copyto(p, q, where=found)
            hit[c > 0] = k
        t = g.target - 1  # the tokens' positions in these arrays
        uni = _field(recs[0], 3)[g.target]
        ct = col[t]
        p_uni = (uni + 0.5) / (lv1.fold_consts[2][ct] + 0.5 * (lv1.fold_consts[1][ct] + 1))
        return np.log(p[t]), np.log(p_uni), hit[t], uni, np.log(p2[t])

    @functools.cached_property
    def _levels(self) -> list[_Level]:
        """The scoring view of the tables, built once per model (see `_Level`)."""
        k = self.num_folds
        out = []
        for n in range(1, self.order + 1):
            keys = self.tables[n - 1].keys
            if n < self.order:  # the n-grams and the contexts of order n + 1 (also n-grams)
                keys = _union(keys, self.ctx_tables[n - 1].keys)

            def spread(src_keys: np.ndarray, v: np.ndarray, keys=keys) -> np.ndarray:
                flat = np.zeros((len(keys) + 1) * k, np.float32)  # the last row: absent
                row = np.searchsorted(keys, src_keys).astype(np.int64) * k
                flat[(row[:, None] + np.arange(k)).reshape(-1)] = v.reshape(-1)  # 1-D: faster
                return flat

            count = spread(self.tables[n - 1].keys, self.values[n - 1])
            consts: tuple[np.ndarray, ...] = ()
            if n == self.order:  # the top order is no context: its count alone
                out.append(_Level(HashTable(keys), count, consts))
                continue
            rec = np.zeros((len(count), 4), np.float32)
            rec[:, 0] = count
            rec[:, 1] = spread(self.ctx_tables[n - 1].keys, self.ctx_total[n - 1])
            rec[:, 2] = spread(self.ctx_tables[n - 1].keys, self.ctx_types[n - 1])
            if n == 1:
                rec[:, 3] = spread(self.tables[0].keys, self.uni_counts)
                v = self.values[0]
                consts = (
                    v.sum(axis=0, dtype=np.float64),
                    (v > 0).sum(axis=0).astype(np.float64),
                    self.uni_counts.sum(axis=0, dtype=np.float64),
                )
            out.append(_Level(HashTable(keys), rec.view(np.complex128).reshape(-1), consts))
        return out


def _union(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """np.union1d of two sorted distinct uint64 arrays, by one (SIMD) sort: np.unique's
    hash-based pass is several times slower here."""
    s = np.sort(np.concatenate([a, b]))
    return s[np.concatenate([[True], s[1:] != s[:-1]])] if len(s) else s


@dataclass
class _Level:
    """Order n's lookup for scoring: one table of the n-grams and the order n + 1 contexts
    (both n-token hashes), with the values of each (row, fold) at flat index row x K + fold
    [(rows + 1) x K] (row-major; the last row is zeros: absent). A position's row at order n
    serves its own n-gram and, one position later, the next order's context, so below the
    top order the values are one 16-byte record, read by one gather (`_field` splits it):
    [count, total, types, uni] as float32 - the n-gram's (continuation) count (0 for a
    context that is no n-gram); as a context c(h •) (0 for an n-gram that is no context) and
    N1+(h •); order 1's raw counts (0 above order 1). The top order: its count, float32."""

    table: HashTable
    record: np.ndarray  # complex128 [(rows + 1) x K] records; float32 counts at the top order
    fold_consts: tuple[np.ndarray, ...]  # order 1: per fold total, types, raw tokens (float64)


def _field(records: np.ndarray, j: int) -> np.ndarray:
    """Field j of gathered `_Level.record`s (a strided float32 view); a float32 array is the
    top order's counts (field 0)."""
    if records.dtype == np.float32:
        return records
    return records.view(np.float32).reshape(-1, 4)[:, j]


_ALL_ONES = np.uint64(0xFFFF_FFFF_FFFF_FFFF)  # the sentinel after the last key: stops every probe


@dataclass
class HashTable:
    """Sorted distinct uint64 keys (uniform hashes) with a bucket index over their top `bits`
    bits: the keys of bucket b are keys[start[b]:start[b + 1]] (they are contiguous, the keys
    being sorted). A lookup reads its bucket's first key and, where that key is smaller, the
    next ones (at <= 1/2 key per bucket ~1.25 reads, no search, no displaced runs): a query's
    place in `keys` is the first key >= it at or after its bucket's start. Memory: 8 B (key) +
    4 B x 2-4 buckets per key. A key's position in `keys` is its position in the caller's
    value arrays."""

    keys: np.ndarray  # uint64 [n], sorted, distinct

    @staticmethod
    def build(keys: np.ndarray) -> HashTable:
        """keys: distinct uint64, ascending (as np.unique returns them)."""
        return HashTable(keys)

    @functools.cached_property
    def _index(self) -> tuple[np.ndarray, np.ndarray, np.uint64]:
        """(keys + the all-ones sentinel, bucket heads complex128 [2^bits], shift 64 - bits):
        a bucket's head is the 16-byte record (its first key: that of the next non-empty
        bucket, or the sentinel, when it is empty; the key's position), read by one gather."""
        n = len(self.keys)
        bits = max((2 * n).bit_length(), 1)  # 2^bits > 2n buckets: load < 1/2
        shift = np.uint64(64 - bits)
        home = (self.keys >> shift).astype(np.intp)
        start = np.zeros((1 << bits) + 1, np.int64)
        np.cumsum(np.bincount(home, minlength=1 << bits), out=start[1:])
        ext = np.concatenate([self.keys, [_ALL_ONES]])
        heads = np.empty((1 << bits, 2), np.uint64)
        heads[:, 0] = ext[start[:-1]]
        heads[:, 1] = start[:-1]
        return ext, heads.view(np.complex128).reshape(-1), shift

    def rows(self, query: np.ndarray) -> np.ndarray:
        """int32 [len(query)]: each query's position in `keys`, len(keys) where absent (the
        index of a zero row callers append to their value arrays)."""
        ext, heads, shift = self._index
        n = len(self.keys)
        head = heads[(query >> shift).astype(np.intp)].view(np.uint64).reshape(-1, 2)
        got = head[:, 0]
        at = head[:, 1].astype(np.int32)
        # keys ascend and every earlier bucket holds smaller keys: read on while the key is
        # smaller than the query; the sentinel (or any larger key) ends the probe
        pending = np.flatnonzero(got < query)
        if len(pending):
            got = got.copy()
        while len(pending):
            a = at[pending] + 1
            at[pending] = a
            g = ext[a]
            got[pending] = g
            pending = pending[g < query[pending]]
        # the all-ones query stops at the sentinel: n, absent, unless it is the last key
        return np.where(got == query, at, np.int32(n))

    def find(self, query: np.ndarray) -> np.ndarray:
        """int64 [len(query)]: each key's position in `keys`, -1 where absent."""
        r = self.rows(query).astype(np.int64)
        r[r == len(self.keys)] = -1
        return r


def _group(keys: np.ndarray) -> tuple[np.ndarray, ...]:
    """(distinct keys ascending, one occurrence index per key, group id of every element).
    Like np.unique with return_index/return_inverse, but the occurrence is *some* occurrence:
    all occurrences of an n-gram hash share their sub-n-gram hashes. By `_distinct` (a SIMD
    sort of the values and a hash probe for the group ids): ~5x faster than an argsort of
    1-2 M uint64 n-gram hashes, the same groups."""
    rep, gid = _distinct(keys)
    return keys[rep], rep, gid


def _per_fold(
    gid: np.ndarray,
    num: int,
    fold: np.ndarray,
    k: int,
    w: np.ndarray | None = None,
    extra: tuple[np.ndarray, np.ndarray] | None = None,
):
    """[num, k] sums of `w` (default 1) by (group, fold): column f = all folds but f (k > 1),
    less the elements `extra` = (element indexes, fold) leaves out of that fold's column too."""
    total = np.bincount(gid * k + fold, weights=w, minlength=num * k).reshape(num, k)
    if k == 1:
        return total.astype(np.float32)
    out = total.sum(axis=1, keepdims=True) - total
    if extra is not None and len(extra[0]):
        at, f = extra
        wx = None if w is None else w[at]
        out -= np.bincount(gid[at] * k + f, weights=wx, minlength=num * k).reshape(num, k)
    return out.astype(np.float32)


def train_lm(
    tokens: Tokens,
    order: int = 4,
    doc_fold: np.ndarray | None = None,
    num_folds: int = 1,
    exclude: tuple[np.ndarray, np.ndarray] | None = None,
) -> NgramLM:
    """Count and smooth order-`order` (2..6) models over the documents in `tokens`; with folds,
    model f leaves out the documents with doc_fold == f, and those that `exclude` = (document
    indexes, fold), distinct pairs with fold != doc_fold, leaves out of model f too
    (quality/copies.py, copier_exclusions). One sort per order serves all folds."""
    assert 2 <= order <= 6
    k = num_folds
    doc_fold = np.zeros(len(tokens.lengths), np.int64) if doc_fold is None else doc_fold
    g = _grams(tokens, order)
    t = g.target
    fold = np.repeat(doc_fold.astype(np.int64), tokens.lengths)
    extra = None
    if exclude is not None and len(exclude[0]) and k > 1:
        docs, ex_fold = np.asarray(exclude[0], np.int64), np.asarray(exclude[1], np.int64)
        first = np.cumsum(tokens.lengths) - tokens.lengths
        n_tok = tokens.lengths[docs]
        at = np.repeat(first[docs], n_tok) + (
            np.arange(int(n_tok.sum()), dtype=np.int64) - np.repeat(np.cumsum(n_tok) - n_tok, n_tok)
        )
        extra = (at, np.repeat(ex_fold, n_tok))
    keys: list[np.ndarray] = [np.zeros(0, np.uint64)] * order
    values: list[np.ndarray] = [np.zeros((0, k), np.float32)] * order
    reps: list[np.ndarray] = [np.zeros(0, np.int64)] * order  # a position of each n-gram
    # top order: raw counts of the occurrences in the other folds
    keys[-1], rep, gid = _group(g.h[order - 1][t])
    values[-1] = _per_fold(gid, len(keys[-1]), fold, k, extra=extra)
    reps[-1] = t[rep]
    for n in range(order - 1, 0, -1):
        # continuation count of an n-gram in model f = distinct (n+1)-grams model f saw that
        # end with it
        keys[n - 1], rep, gid = _group(g.h[n - 1][reps[n]])
        seen = (values[n] > 0).astype(np.float64)
        values[n - 1] = np.stack(
            [np.bincount(gid, weights=seen[:, f], minlength=len(keys[n - 1])) for f in range(k)],
            axis=1,
        ).astype(np.float32)
        reps[n - 1] = reps[n][rep]
    ctx_tables, ctx_total, ctx_types = [], [], []
    for n in range(2, order + 1):  # context of an n-gram: the (n-1)-gram one position earlier
        ck, _, cg = _group(g.h[n - 2][reps[n - 1] - 1])
        v = values[n - 1].astype(np.float64)
        ctx_total.append(_stack_bincount(cg, v, len(ck)))
        ctx_types.append(_stack_bincount(cg, (v > 0).astype(np.float64), len(ck)))
        ctx_tables.append(HashTable.build(ck))
    uk, _, ug = _group(g.h[0][t])
    assert np.array_equal(uk, keys[0])  # every word ends a bigram (<s> padding)
    return NgramLM(
        order,
        [HashTable.build(x) for x in keys],
        values,
        ctx_tables,
        ctx_total,
        ctx_types,
        np.stack([_discounts(v) for v in values]),
        _per_fold(ug, len(uk), fold, k, extra=extra),
    )


def _stack_bincount(gid: np.ndarray, w: np.ndarray, num: int) -> np.ndarray:
    """[num, K] float32: column f = bincount(gid, weights=w[:, f])."""
    cols = [np.bincount(gid, weights=w[:, f], minlength=num) for f in range(w.shape[1])]
    return np.stack(cols, axis=1).astype(np.float32)
