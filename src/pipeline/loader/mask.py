"""make_doc_mask: the attention mask of packed sequences (causal, and only within a document).

Works on numpy arrays and on torch tensors (same type out, torch never imported here).
"""

from __future__ import annotations

from typing import Any

import numpy as np


def make_doc_mask(segment_ids: Any) -> Any:
    """Bool [..., L, L] from segment_ids [..., L]: mask[..., i, j] is True when query i may
    attend key j, i.e. j <= i and both tokens belong to the same document (segment id).
    Padding (segment 0) forms one block of its own: it never mixes with real tokens, and every
    row keeps its diagonal, so softmax over a row is never empty (no NaN).
    For torch's scaled_dot_product_attention, True = attend; add a head axis with unsqueeze(1).
    """
    if type(segment_ids).__module__.startswith("torch"):
        import torch

        seg = segment_ids
        length = seg.shape[-1]
        causal = torch.ones(length, length, dtype=torch.bool, device=seg.device).tril()
        return (seg.unsqueeze(-1) == seg.unsqueeze(-2)) & causal
    seg = np.asarray(segment_ids)
    if seg.ndim == 0:
        raise ValueError("segment_ids must have a sequence axis, got a scalar")
    length = seg.shape[-1]
    causal = np.tril(np.ones((length, length), bool))
    return (seg[..., :, None] == seg[..., None, :]) & causal
