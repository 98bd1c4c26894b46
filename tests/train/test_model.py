"""The proxy GPT: the doc mask it attends with, what carries loss, and shape."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from pipeline.loader import make_doc_mask  # noqa: E402
from pipeline.train.model import GPT, ModelShape, loss_sum, target_mask  # noqa: E402

SHAPE = ModelShape(vocab_size=50, seq_len=12, n_layer=2, n_head=2, d_model=16)


def _model(seed: int = 0) -> GPT:
    torch.manual_seed(seed)
    return GPT(SHAPE).eval()


def test_documents_never_attend_across_their_boundary():
    """Changing document 1's tokens must not change document 2's logits (nor padding's), and
    the logits of a document packed after another equal those of the document alone."""
    m = _model()
    ids = torch.randint(0, 50, (1, 12))
    seg = torch.tensor([[1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 0, 0]])
    other = ids.clone()
    other[0, :5] = torch.randint(0, 50, (5,))
    with torch.no_grad():
        a, b = m(ids, seg), m(other, seg)
        assert not torch.allclose(a[0, :5], b[0, :5])  # doc 1 itself did change
        torch.testing.assert_close(a[0, 5:], b[0, 5:])  # doc 2 and padding did not
        # doc 2 alone at the same positions (doc 1 replaced by padding): same logits
        alone = m(ids, torch.tensor([[0, 0, 0, 0, 0, 2, 2, 2, 2, 2, 0, 0]]))
        torch.testing.assert_close(a[0, 5:10], alone[0, 5:10])


def test_model_mask_is_make_doc_mask_and_causal():
    seg = torch.tensor([[1, 1, 2, 2, 2, 0]])
    mask = make_doc_mask(seg)[0]
    expect = torch.tensor(
        [
            [1, 0, 0, 0, 0, 0],
            [1, 1, 0, 0, 0, 0],
            [0, 0, 1, 0, 0, 0],
            [0, 0, 1, 1, 0, 0],
            [0, 0, 1, 1, 1, 0],
            [0, 0, 0, 0, 0, 1],
        ],
        dtype=torch.bool,
    )
    assert torch.equal(mask, expect)


def test_padding_carries_no_loss_and_boundaries_count_once():
    """Targets: t+1 where t and t+1 are real tokens. Segments [1 1 1 2 2 0 0]: positions
    0..3 predict 1..4 (4 targets, 2->3 is doc 2's first token from doc 1's EOS); padding none."""
    seg = torch.tensor([[1, 1, 1, 2, 2, 0, 0]])
    assert target_mask(seg).tolist() == [[True, True, True, True, False, False]]
    m = _model()
    ids = torch.randint(0, 50, (1, 12))
    seg = torch.tensor([[1] * 6 + [0] * 6])
    with torch.no_grad():
        nats, count = loss_sum(m, ids, seg)
    assert int(count) == 5
    junk = ids.clone()
    junk[0, 6:] = (junk[0, 6:] + 7) % 50  # padding tokens changed: the loss is the same
    with torch.no_grad():
        nats2, _ = loss_sum(m, junk, seg)
    assert float(nats) == pytest.approx(float(nats2), rel=0, abs=1e-6)


def test_shape_and_tied_head():
    m = _model()
    out = m(torch.zeros(3, 12, dtype=torch.long), torch.ones(3, 12, dtype=torch.long))
    assert out.shape == (3, 12, 50)
    assert m.tok.weight.data_ptr() in {p.data_ptr() for p in m.parameters()}
    assert m.num_params(embeddings=True) - m.num_params() == 12 * 16
