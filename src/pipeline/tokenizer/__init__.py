"""From-scratch byte-level BPE: pre-tokenizer, trainer, encoder/decoder, tokenizer.json I/O."""

from pipeline.tokenizer.bpe import DEFAULT_SPECIALS, EOS, PAD, PII_PLACEHOLDERS, Tokenizer
from pipeline.tokenizer.hf import load, save
from pipeline.tokenizer.train import TrainResult, train_bpe

__all__ = [
    "DEFAULT_SPECIALS",
    "EOS",
    "PAD",
    "PII_PLACEHOLDERS",
    "Tokenizer",
    "TrainResult",
    "load",
    "save",
    "train_bpe",
]
