"""From-scratch byte-level BPE: pre-tokenizer, trainer, model (model.py), Tokenizer (bpe.py) and
its batch encoder (encoder.py), tokenizer.json bytes and loading (hf.py)."""

from pipeline.tokenizer.bpe import Tokenizer
from pipeline.tokenizer.hf import dumps, load
from pipeline.tokenizer.model import DEFAULT_SPECIALS, EOS, PAD, PII_PLACEHOLDERS, BpeModel
from pipeline.tokenizer.train import TrainResult, train_bpe

__all__ = [
    "BpeModel",
    "DEFAULT_SPECIALS",
    "EOS",
    "PAD",
    "PII_PLACEHOLDERS",
    "Tokenizer",
    "TrainResult",
    "dumps",
    "load",
    "train_bpe",
]
