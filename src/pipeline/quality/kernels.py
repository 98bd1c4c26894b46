"""The n-gram LM's scoring loop as one compiled pass (numba): `NgramLM.log_probs`'s numpy
definition (`log_probs_numpy`, the tested reference) costs ~15 full-array passes per token
(chain hashes per order, a probe loop per order, gathers, the Kneser-Ney interpolation); this
walks the padded tokens once, keeping each order's chain hash and table row of the previous
position in registers.

Same arithmetic, same order of operations, in float64 from the same float32 tables: the
probabilities are bit-identical to the numpy path (tests/test_lmkernel.py checks every output
on real and random models, with document and token folds). numba does not contract a*b + c
into one FMA without fastmath, and the logarithms stay in numpy (`np.log` of the returned
arrays), so no libm difference enters either.
"""

from __future__ import annotations

import numpy as np
from numba import njit

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)  # pipeline.hashing.GOLDEN64
_M1 = np.uint64(0xBF58476D1CE4E5B9)  # pipeline.permute.mix64's multipliers
_M2 = np.uint64(0x94D049BB133111EB)
_S30, _S27, _S31 = np.uint64(30), np.uint64(27), np.uint64(31)


@njit(cache=True, nogil=True, inline="always")
def _mix(x):  # pipeline.permute.mix64 of one value
    x ^= x >> _S30
    x *= _M1
    x ^= x >> _S27
    x *= _M2
    x ^= x >> _S31
    return x


_BATCH = 256  # positions per batch: hash, probe, score (its arrays stay in L1)


@njit(cache=True, nogil=True)
def kn_scores(
    ids, lengths, col_doc, tok_fold, order, k_folds, bos,
    rows, keys, row_off, width, start, start_off, shift, nkeys,
    uni, c_total, c_types, c_raw, disc,
):  # fmt: skip
    """(P_KN, P_unigram, hit order int8, raw unigram count float32, P_KN at the bigram
    level) per token, as NgramLM.log_probs before its logarithms. `tok_fold`: int64 [T] or
    an empty array (every token scored by its document's model, `col_doc`). The tables: one
    float32 row per n-gram of each order (`rows`; `keys` is the same memory as uint64), row r
    of order k + 1 at rows[row_off[k] + r * width[k]:]: its key (2 words), then per fold its
    count, then (orders below the top) per fold its total and types as a context; row
    nkeys[k] is the all-ones sentinel (ends every probe) and the absent row (zeros). One row
    (<= 64 bytes, aligned) holds all a lookup reads, and a context's row is the n-gram row the
    position before read. Positions go in batches of _BATCH: chain hashes and bucket starts
    of the whole batch first, then the probes, then the scores, so that the table reads of
    many positions are in flight at once (no branch on table contents in the first two)."""
    num = ids.shape[0]
    p_out = np.empty(num, np.float64)
    pu_out = np.empty(num, np.float64)
    hit_out = np.empty(num, np.int8)
    uni_out = np.empty(num, np.float32)
    p2_out = np.empty(num, np.float64)
    pad = order - 1
    n_docs = lengths.shape[0]
    size = 0
    for d in range(n_docs):
        size += lengths[d] + pad
    per_token = tok_fold.shape[0] > 0
    # per batch position: chain hash and row start (floats into `rows`) per order, the row of
    # order 1, the token (-1: a pad) and its fold column
    hh = np.empty((_BATCH + 1, order), np.uint64)
    at = np.empty((_BATCH + 1, order), np.int64)
    r1 = np.empty(_BATCH + 1, np.int64)
    tok = np.empty(_BATCH + 1, np.int64)
    col = np.empty(_BATCH + 1, np.int64)
    d, j, t = 0, 0, 0  # the next position: document d, its j-th padded position; next token t
    done = 0
    while done < size:
        b = min(_BATCH, size - done)
        # slot 0 holds the previous batch's last position (contexts, chain hashes)
        if done > 0:
            hh[0] = hh[_BATCH]
            at[0] = at[_BATCH]
        for i in range(1, b + 1):
            while j >= lengths[d] + pad:
                d += 1
                j = 0
            if j >= pad:
                h1 = ids[t]
                tok[i] = t
                col[i] = tok_fold[t] if per_token else col_doc[d]
                t += 1
            else:
                h1 = bos
                tok[i] = -1
                col[i] = col_doc[d]
            j += 1
            hh[i, 0] = h1
            for k in range(1, order):  # the chain hash of k + 1 tokens ending here
                hh[i, k] = h1 if done + i == 1 else _mix(hh[i - 1, k - 1] * _GOLDEN ^ h1)
            for k in range(order):
                at[i, k] = start[start_off[k] + np.int64(hh[i, k] >> shift[k])]
        for i in range(1, b + 1):
            for k in range(order):
                q = hh[i, k]
                off, w = row_off[k], width[k]
                a = at[i, k]
                while keys[(off + a * w) >> 1] < q:
                    a += 1
                r = a if keys[(off + a * w) >> 1] == q else nkeys[k]
                at[i, k] = off + r * w
                if k == 0:
                    r1[i] = r
        for i in range(1, b + 1):
            t_i = tok[i]
            if t_i < 0:
                continue
            c = col[i]
            c1 = np.float64(rows[at[i, 0] + 2 + c])
            dd = disc[0, c]
            types1 = c_types[c]
            p = (max(c1 - dd, 0.0) + dd * types1 / (types1 + 1.0)) / max(c_total[c], 1.0)
            hit = np.int8(1) if c1 > 0 else np.int8(0)
            p2 = p
            for k in range(2, order + 1):
                a = at[i - 1, k - 2] + 2 + k_folds + c  # the context's total, one back
                den = rows[a]
                cc = np.float64(rows[at[i, k - 1] + 2 + c])
                den64 = np.float64(den) if den > 0 else 1.0
                dk = disc[k - 1, c]
                typ = np.float64(rows[a + k_folds])
                q_k = max(cc - dk, 0.0) / den64 + dk * typ / den64 * p
                p = q_k if den > 0 else p
                hit = np.int8(k) if cc > 0 else hit
                if k == 2:
                    p2 = p
            u = uni[r1[i] * k_folds + c]
            p_out[t_i] = p
            pu_out[t_i] = np.float64(u + np.float32(0.5)) / (c_raw[c] + 0.5 * (types1 + 1.0))
            hit_out[t_i] = hit
            uni_out[t_i] = u
            p2_out[t_i] = p2
        done += b
        if b == _BATCH:
            continue
        # last batch: nothing follows
    return p_out, pu_out, hit_out, uni_out, p2_out
