"""From-scratch byte-level BPE: pre-tokenizer, trainer, model (model.py), Tokenizer (bpe.py) and
its batch encoder (encoder.py), tokenizer.json I/O (hf.py)."""

from pipeline.tokenizer.bpe import Tokenizer
from pipeline.tokenizer.hf import load, save
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
    "load",
    "save",
    "train_bpe",
]
