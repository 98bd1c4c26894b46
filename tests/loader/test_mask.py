"""make_doc_mask: causal and block-diagonal per packed document, numpy and torch alike."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from pipeline.loader import make_doc_mask

torch = pytest.importorskip("torch")


def test_worked_example():
    """Two documents (1 1 | 2 2 2) then padding (0): token 3 sees tokens 2-3 only."""
    m = make_doc_mask(np.array([1, 1, 2, 2, 2, 0]))
    assert m.dtype == bool and m.shape == (6, 6)
    assert m[3].tolist() == [False, False, True, True, False, False]
    assert m[1].tolist() == [True, True, False, False, False, False]
    assert m[5].tolist() == [False] * 5 + [True]  # padding: itself, never a real token


@settings(max_examples=50, deadline=None)
@given(
    seg=arrays(
        np.uint16, st.tuples(st.integers(1, 3), st.integers(1, 24)), elements=st.integers(0, 4)
    )
)
def test_mask_is_causal_same_document_and_matches_torch(seg):
    m = make_doc_mask(seg)
    assert m.shape == seg.shape + seg.shape[-1:]
    b, length = seg.shape
    for k in range(b):
        for i in range(length):
            for j in range(length):
                assert m[k, i, j] == (j <= i and seg[k, i] == seg[k, j])
    assert m[:, np.arange(length), np.arange(length)].all()  # no empty softmax row
    t = make_doc_mask(torch.from_numpy(seg.astype(np.int64)))
    assert t.dtype == torch.bool and np.array_equal(t.numpy(), m)


def test_mask_drives_attention_per_document():
    """With the mask, a document's outputs do not change when the other documents do."""
    torch.manual_seed(0)
    seg = torch.tensor([[1, 1, 1, 2, 2, 0]])
    q = torch.randn(1, 1, 6, 4)
    mask = make_doc_mask(seg).unsqueeze(1)
    out = torch.nn.functional.scaled_dot_product_attention(q, q, q, attn_mask=mask)
    q2 = q.clone()
    q2[..., 3:, :] = torch.randn(1, 1, 3, 4)  # change document 2 and the padding
    out2 = torch.nn.functional.scaled_dot_product_attention(q2, q2, q2, attn_mask=mask)
    assert torch.allclose(out[..., :3, :], out2[..., :3, :]) and not torch.isnan(out).any()
