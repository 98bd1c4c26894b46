"""The proxy model: a small pre-norm GPT in torch, and its next-token loss on packed sequences.

Attention is torch's scaled_dot_product_attention with pipeline.loader's make_doc_mask, so a
packed document never attends across its boundary. Targets: token t+1 counts when both t and
t+1 are real tokens (segment > 0). A document's first token is predicted from the previous
document's EOS, whose attention saw only its own document: what the model learns there is how
documents start, never the previous one's content. Padding (segment 0) carries no loss.
Not here: data, optimiser, checkpoints (trainer.py).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch
import torch.nn.functional as F
from torch import nn

from pipeline.loader import make_doc_mask


@dataclass(frozen=True)
class ModelShape:
    """What fixes the parameter shapes: a checkpoint only loads into the same shape."""

    vocab_size: int
    seq_len: int
    n_layer: int
    n_head: int
    d_model: int

    def to_dict(self) -> dict[str, int]:
        return asdict(self)


class Block(nn.Module):
    def __init__(self, shape: ModelShape, dropout: float):
        super().__init__()
        d = shape.d_model
        self.n_head, self.dropout = shape.n_head, dropout
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc, self.out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
        self.drop = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        b, length, d = x.shape
        q, k, v = (
            self.qkv(self.ln1(x)).view(b, length, 3, self.n_head, -1).transpose(1, 3).unbind(2)
        )
        att = F.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, dropout_p=self.dropout if self.training else 0.0
        )
        x = x + self.drop(self.proj(att.transpose(1, 2).reshape(b, length, d)))
        return x + self.drop(self.out(F.gelu(self.fc(self.ln2(x)))))


class GPT(nn.Module):
    """Token + position embeddings, n_layer pre-norm blocks, final norm, tied LM head.

    forward(input_ids [B, L] int64, segment_ids [B, L]) -> logits [B, L, vocab] (float).
    """

    def __init__(self, shape: ModelShape, dropout: float = 0.0):
        super().__init__()
        self.shape = shape
        self.tok = nn.Embedding(shape.vocab_size, shape.d_model)
        self.pos = nn.Embedding(shape.seq_len, shape.d_model)
        self.drop = nn.Dropout(dropout)
        self.blocks = nn.ModuleList(Block(shape, dropout) for _ in range(shape.n_layer))
        self.ln = nn.LayerNorm(shape.d_model)
        self.apply(self._init)
        for name, p in self.named_parameters():  # GPT-2: residual projections scaled by depth
            if name.endswith(("proj.weight", "out.weight")):
                nn.init.normal_(p, 0.0, 0.02 / math.sqrt(2 * shape.n_layer))

    @staticmethod
    def _init(m: nn.Module) -> None:
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, 0.0, 0.02)
        if isinstance(m, nn.Linear) and m.bias is not None:
            nn.init.zeros_(m.bias)

    def num_params(self, embeddings: bool = False) -> int:
        """Parameters; without position embeddings unless asked (the FLOP count's N)."""
        n = sum(p.numel() for p in self.parameters())
        return n if embeddings else n - self.pos.weight.numel()

    def forward(self, input_ids: torch.Tensor, segment_ids: torch.Tensor) -> torch.Tensor:
        length = input_ids.shape[1]
        mask = make_doc_mask(segment_ids).unsqueeze(1)  # bool [B, 1, L, L]: True = attend
        pos = torch.arange(length, device=input_ids.device)
        x = self.drop(self.tok(input_ids) + self.pos(pos))
        for block in self.blocks:
            x = block(x, mask)
        return self.ln(x) @ self.tok.weight.t()  # tied head: [B, L, vocab]


def target_mask(segment_ids: torch.Tensor) -> torch.Tensor:
    """bool [B, L-1]: whether token t+1 is a target (both t and t+1 real, segment > 0)."""
    return (segment_ids[:, 1:] > 0) & (segment_ids[:, :-1] > 0)


def loss_sum(
    model: nn.Module, input_ids: torch.Tensor, segment_ids: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """(summed next-token nats over the targets, number of targets), both scalar tensors; the
    caller divides by the global count, so micro-batches and ranks add up exactly."""
    logits = model(input_ids, segment_ids)  # [B, L, vocab]: no [:, :-1] slice, no copy of it
    keep = target_mask(segment_ids)
    target = torch.full_like(input_ids, -100)  # the last position predicts nothing
    target[:, :-1] = input_ids[:, 1:].masked_fill(~keep, -100)
    nats = F.cross_entropy(
        logits.view(-1, logits.shape[-1]).float(), target.view(-1), reduction="sum"
    )
    return nats, keep.sum()


def flops_per_token(shape: ModelShape, num_params: int) -> float:
    """Training FLOPs per token (forward + backward): 6N + 12·layers·d_model·seq_len (PaLM)."""
    return 6.0 * num_params + 12.0 * shape.n_layer * shape.d_model * shape.seq_len
