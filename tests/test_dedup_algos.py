"""dedup algorithms: S-curve arithmetic, union-find, Bloom filter, MinHash vs datasketch."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from pipeline.dedup import minhash
from pipeline.dedup.bloom import BloomFilter, bloom_size
from pipeline.dedup.cluster import exact_first
from pipeline.dedup.lsh import band_edges, fp_fn_areas, optimal_bands, s_curve
from pipeline.dedup.minhash import estimate_jaccard, minhash_texts, simplify
from pipeline.dedup.unionfind import UnionFind, components


def test_s_curve_values():
    """P = 1 - (1 - s^r)^b: s=0.8, b=9, r=13 -> 0.8^13 = 0.054976, 1 - 0.945024^9 = 0.39884."""
    assert s_curve(0.8, 9, 13) == pytest.approx(0.39884, abs=1e-5)
    assert s_curve(0.0, 5, 5) == 0.0 and s_curve(1.0, 5, 5) == 1.0


def test_fp_fn_areas_closed_form():
    """b = r = 1: P(s) = s, so FP = t^2 / 2 and FN = (1 - t)^2 / 2."""
    fp, fn = fp_fn_areas(0.6, 1, 1)
    assert fp == pytest.approx(0.18, abs=1e-6) and fn == pytest.approx(0.08, abs=1e-6)


@pytest.mark.parametrize(
    ("threshold", "num_perm", "expected"),
    [(0.9, 128, (5, 25)), (0.8, 128, (9, 13)), (0.5, 128, (25, 5)), (0.8, 256, (17, 15))],
)
def test_optimal_bands_match_datasketch(threshold, num_perm, expected):
    """Equal weights reproduce datasketch's _optimal_param (values from anchors-pipeline.md)."""
    assert optimal_bands(threshold, num_perm, 0.5) == expected


def test_fn_weight_moves_the_curve_left():
    b5, r5 = optimal_bands(0.8, 128, 0.5)
    b9, r9 = optimal_bands(0.8, 128, 0.9)
    assert b9 * r9 <= 128 and s_curve(0.8, b9, r9) > s_curve(0.8, b5, r5) + 0.3


def _reference_components(n: int, edges: list[tuple[int, int]]) -> list[int]:
    adj: dict[int, set[int]] = {i: set() for i in range(n)}
    for a, b in edges:
        adj[a].add(b)
        adj[b].add(a)
    label = [-1] * n
    for s in range(n):
        if label[s] < 0:
            stack, comp = [s], []
            label[s] = s
            while stack:
                x = stack.pop()
                comp.append(x)
                for y in adj[x]:
                    if label[y] < 0:
                        label[y] = s
                        stack.append(y)
    return label


def test_components_match_reference_and_ignore_edge_order():
    rng = np.random.default_rng(0)
    for _ in range(20):
        n = int(rng.integers(1, 60))
        edges = rng.integers(0, n, size=(int(rng.integers(0, 50)), 2))
        want = _reference_components(n, [tuple(e) for e in edges.tolist()])
        assert components(n, edges).tolist() == want
        shuffled = edges[rng.permutation(len(edges))][:, ::-1]
        assert components(n, np.ascontiguousarray(shuffled)).tolist() == want


def test_union_find_by_size_and_compression():
    uf = UnionFind(6)
    uf.union(0, 1)
    uf.union(2, 3)
    uf.union(3, 4)  # {2,3,4} is larger: it absorbs {0,1}
    root = uf.union(1, 4)
    assert root == uf.find(2) and uf.size[root] == 5
    uf.find(0)
    assert uf.parent[0] == root  # path compressed
    assert uf.find(5) == 5 and uf.size[5] == 1


def test_band_edges_star_per_bucket():
    """Buckets {0,2,5} and {1,4}: edges link each member to its bucket's lowest index."""
    keys = np.array([5, 3, 5, 7, 3, 5, 9], np.uint64)
    assert sorted(map(tuple, band_edges(keys).tolist())) == [(0, 2), (0, 5), (1, 4)]


def test_exact_first_occurrence():
    keys = np.array([[1, 2], [3, 4], [1, 2], [1, 3], [3, 4]], np.uint64)
    assert exact_first(keys).tolist() == [0, 1, 0, 3, 1]


def test_bloom_false_positive_rate_on_100k_keys():
    """m = -n ln p / ln(2)^2 = 958,506 bits and k = 7 for n = 100k, p = 1%; the measured rate on
    100k fresh keys stays within 1.5x the target, and inserted keys are always found."""
    n, p = 100_000, 0.01
    bits, k = bloom_size(n, p)
    assert bits == math.ceil(-n * math.log(p) / math.log(2) ** 2) and k == 7
    rng = np.random.default_rng(1)
    keys = rng.integers(0, 2**64, size=(2 * n, 2), dtype=np.uint64)
    bloom = BloomFilter(bits, k)
    bloom.add(keys[:n])
    assert bloom.contains(keys[:n]).all()
    fp = bloom.contains(keys[n:]).mean()
    assert fp <= 1.5 * p
    assert bloom.fp_estimate() == pytest.approx(fp, rel=0.3)
    assert bloom.fp_expected() == pytest.approx(p, rel=0.1)


def test_bloom_add_new_marks_repeats_in_a_batch():
    bloom = BloomFilter(*bloom_size(100, 1e-6))
    keys = np.array([[1, 1], [2, 2], [1, 1]], np.uint64)
    assert bloom.add_new(keys).tolist() == [False, False, True]
    assert bloom.add_new(keys[:1]).tolist() == [True]


def test_signature_is_independent_of_batch_and_order():
    texts = [
        f"doc {i} " + " ".join(["word"] * i) + " end of story number " + str(i * 7)
        for i in range(30)
    ]
    whole = minhash_texts(texts, 64, 3, seed=5)
    parts = np.concatenate(
        [minhash_texts(texts[i : i + 7], 64, 3, seed=5) for i in range(0, 30, 7)]
    )
    assert np.array_equal(whole, parts)
    assert np.array_equal(minhash_texts(texts[::-1], 64, 3, seed=5), whole[::-1])
    assert not np.array_equal(minhash_texts(texts, 64, 3, seed=6), whole)


def test_non_ascii_punctuation_space_and_emoji():
    """NBSP and ideographic space split words; em dash and emoji (astral, \\p{So}) are deleted."""
    text = "Caf\u00e9\u00a0au\u3000lait\u2014tr\u00e8s bon \U0001f600!"
    assert simplify(text) == "caf\u00e9 au laittr\u00e8s bon"
    sig = minhash_texts([text, "caf\u00e9 au laittr\u00e8s bon"], 32, 2, 1)
    assert np.array_equal(sig[0], sig[1])


def test_simplify_rule():
    assert (
        simplify("  Hello,   WORLD!\n\tIt's—fine… ") == "hello world itsfine"
    )  # deleted, not split
    sig = minhash_texts(["  Hello,   WORLD!\n\tIt's—fine… ", "hello world itsfine"], 32, 2, 1)
    assert np.array_equal(sig[0], sig[1])


def _shingles(text: str, n: int) -> set[str]:
    w = simplify(text).split()
    return {" ".join(w[i : i + n]) for i in range(max(1, len(w) - n + 1))}


def test_jaccard_estimates_agree_with_datasketch():
    """On 60 pairs with true Jaccard spread over ~0.2-1, our estimate and datasketch's (same
    shingles, num_perm 256) each stay within 4 sigma of the truth, sigma = sqrt(J(1-J)/256), and
    the two agree with each other on average to within 0.01."""
    datasketch = pytest.importorskip("datasketch")
    rng = np.random.default_rng(3)
    vocab = [f"w{i}" for i in range(3000)]
    num_perm, n = 256, 3
    ours, theirs, truth = [], [], []
    for k in range(60):
        base = [vocab[i] for i in rng.integers(len(vocab), size=200)]
        other = list(base)
        for j in rng.integers(len(other), size=int(k % 20) * 2):
            other[j] = vocab[int(rng.integers(len(vocab)))]
        a, b = " ".join(base), " ".join(other)
        sa, sb = _shingles(a, n), _shingles(b, n)
        truth.append(len(sa & sb) / len(sa | sb))
        sig = minhash_texts([a, b], num_perm, n, seed=k)
        ours.append(float(estimate_jaccard(sig[:1], sig[1:])[0]))
        ma, mb = datasketch.MinHash(num_perm, seed=k), datasketch.MinHash(num_perm, seed=k)
        ma.update_batch([s.encode() for s in sa])
        mb.update_batch([s.encode() for s in sb])
        theirs.append(ma.jaccard(mb))
    truth_a, ours_a, theirs_a = map(np.array, (truth, ours, theirs))
    sigma = np.sqrt(np.maximum(truth_a * (1 - truth_a), 0.01) / num_perm)
    assert truth_a.min() < 0.4 and truth_a.max() == 1.0
    assert (np.abs(ours_a - truth_a) <= 4 * sigma).all()
    assert (np.abs(theirs_a - truth_a) <= 4 * sigma).all()
    assert abs((ours_a - truth_a).mean() - (theirs_a - truth_a).mean()) < 0.01


def test_long_documents_use_sub_blocks_with_the_same_result(monkeypatch):
    """A document with more shingles than one permutation block takes a running-min path."""
    from pipeline.dedup import minhash

    texts = [" ".join(f"w{i % 997}x{i}" for i in range(3000)), "a short one here", "b c d e f g"]
    want = minhash_texts(texts, 64, 5, seed=2)
    monkeypatch.setattr(minhash, "_CHUNK_CELLS", 64 * 100)  # blocks of 100 shingles
    assert np.array_equal(minhash_texts(texts, 64, 5, seed=2), want)


def _reference_words(text: str) -> list[bytes]:
    """The rule, slowly: NUL is a space, punctuation/symbols deleted, lowercased, split."""
    simple = minhash._PUNCT.sub("", text.replace("\x00", " ")).lower()
    return [w.encode("utf-8", "surrogatepass") for w in simple.split()]


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.text(
            alphabet="aZ9 .,!'\t\n\x00\x1c\u00e9\u00c9\u03a3\u0130\u00df\u2014\u3000"
            "\u00a0\u2019\u4e2d\U0001f600\U00010400x",
            max_size=40,
        ),
        min_size=1,
        max_size=6,
    )
)
@example(
    ["\u0130STANBUL \u039f\u0394\u039f\u03a3, \U00010400X \u00c9t\u00c9", "Plain ASCII, Text!"]
)
def test_simplified_bytes_follow_the_rule(texts):
    """ASCII texts (bytes.translate) and the others (UTF-32 lookup; İ and Σ via str.lower) give
    the same words as the rule applied per text, at the returned document offsets."""
    data, bounds = minhash._simplified_bytes(texts)
    for i, text in enumerate(texts):
        assert data[bounds[i] : bounds[i + 1] - 1].split() == _reference_words(text)


def test_word_hashes_are_a_function_of_the_word():
    """Words of 1-40 bytes, and words differing in one byte at each position (chunk edges 8, 16,
    24 included): equal words hash equal wherever they stand, different words differently."""
    rng = np.random.default_rng(0)
    base = "".join(chr(97 + i) for i in rng.integers(26, size=40))
    vocab = [base[:n] for n in range(1, 41)]
    vocab += [base[:p] + "z" + base[p + 1 : 30] for p in range(30)]
    vocab += ["\u00e9t\u00e9" * k for k in range(1, 8)]  # multi-byte UTF-8 across chunk edges
    docs = [" ".join(vocab[i] for i in rng.integers(len(vocab), size=50)) for _ in range(8)]
    keys, _, _ = minhash._tables(3, 8, 1)
    hashes, counts = minhash.word_hashes(docs, keys)
    words = [w for d in docs for w in d.split()]
    assert counts.tolist() == [50] * 8 and len(hashes) == len(words)
    seen: dict[str, int] = {}
    for w, h in zip(words, hashes.tolist(), strict=True):
        assert seen.setdefault(w, h) == h
    assert len(set(seen.values())) == len(seen)
    alone, _ = minhash.word_hashes(list(seen), keys)
    assert alone.tolist() == list(seen.values())


def test_shingle_hashes_match_the_formula():
    """mix64(sum_k word[j+k] * mult[k]) per window inside a document; a short document (k < n
    words) gets one shingle of its k words; none for a document without words."""
    words = np.arange(1, 10, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    counts = np.array([4, 0, 2, 3])
    mult = np.array([3, 5, 7], np.uint64)
    got, per_doc = minhash.shingle_hashes(words, counts, mult)

    def sh(ws):
        acc = sum(int(w) * int(m) for w, m in zip(ws, mult, strict=False)) % 2**64
        return int(minhash._mix64(np.array([acc], np.uint64))[0])

    w = words.tolist()
    want = [sh(w[0:3]), sh(w[1:4]), sh(w[4:6]), sh(w[6:9])]
    assert per_doc.tolist() == [2, 0, 1, 1] and got.tolist() == want
