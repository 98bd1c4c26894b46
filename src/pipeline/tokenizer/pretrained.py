"""A pretrained Hugging Face tokenizer (`tokenize.pretrained: PATH`): any tokenizer.json the
`tokenizers` library loads (BPE, Unigram, WordPiece, with its normalizer, pre-tokenizer and
post-processor), used as is: no training.

Ids are the library's own: a document's tokens are `Tokenizer.encode(text).ids` (the tokenizer's
post-processor included, e.g. Llama's BOS or BERT's [CLS] ... [SEP]), then eos unless the
post-processor already ended the document with it. eos and pad: the tokenizer's own
(tokenizer_config.json or special_tokens_map.json beside the file, else a special token of a
well-known name), else the recipe's `tokenize.eos_token` / `tokenize.pad_token`, else a
RecipeError naming the key. `tokenizers` is an optional extra, imported here only.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from pipeline.errors import RecipeError

# special tokens that are eos / pad by convention (GPT-2, Llama, Mistral, T5, BERT, Qwen, ...)
EOS_NAMES = ("<|endoftext|>", "</s>", "<eos>", "<|end_of_text|>", "<|eot_id|>", "[SEP]")
PAD_NAMES = ("<pad>", "[PAD]", "<|pad|>", "<|padding|>", "<|finetune_right_pad_id|>")
ROLE_FILES = ("tokenizer_config.json", "special_tokens_map.json")  # where HF records roles


def _import_tokenizers(key: str) -> Any:
    try:
        import tokenizers
    except ImportError:
        raise RecipeError(
            key, "needs the `tokenizers` package: pip install 'pipeline[tokenizers]'"
        ) from None
    return tokenizers


def _content(value: Any) -> str | None:
    """A role's token as transformers writes it: a string or {"content": ...}."""
    if isinstance(value, dict):
        value = value.get("content")
    return value if isinstance(value, str) and value else None


def own_roles(path: Path, specials: dict[str, int]) -> dict[str, str]:
    """{"eos": token, "pad": token} the tokenizer itself names: tokenizer_config.json or
    special_tokens_map.json in its folder, else its special tokens of a conventional name."""
    roles: dict[str, str] = {}
    for name in ROLE_FILES:
        try:
            cfg = json.loads((path.parent / name).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if not isinstance(cfg, dict):
            continue
        for role in ("eos", "pad"):
            token = _content(cfg.get(f"{role}_token"))
            if token is not None and role not in roles:
                roles[role] = token
    for role, names in (("eos", EOS_NAMES), ("pad", PAD_NAMES)):
        if role not in roles:
            found = next((n for n in names if n in specials), None)
            if found is not None:
                roles[role] = found
    return roles


class PretrainedTokenizer:
    """What the tokenize stage needs of a tokenizer (encode_batch, eos_id, specials,
    vocab_size), over a `tokenizers.Tokenizer` loaded from `path`."""

    def __init__(self, path: Path, eos_token: str | None = None, pad_token: str | None = None):
        tokenizers = _import_tokenizers("tokenize.pretrained")
        self.path = Path(path)
        raw = self.path.read_bytes()
        self.sha256 = hashlib.sha256(raw).hexdigest()
        try:
            self.tok = tokenizers.Tokenizer.from_str(raw.decode("utf-8"))
            self.model_type = str(json.loads(raw)["model"]["type"])
        except Exception as exc:  # noqa: BLE001 - the library's own error types vary
            raise RecipeError(
                "tokenize.pretrained",
                f"{path}: not a tokenizer.json the tokenizers library loads ({exc})",
            ) from None
        added = self.tok.get_added_tokens_decoder()
        self.specials = {t.content: int(i) for i, t in sorted(added.items()) if t.special}
        own = own_roles(self.path, self.specials)
        recipe = {"eos": eos_token, "pad": pad_token}
        self.roles: dict[str, str] = {}
        self.role_source: dict[str, str] = {}
        for role in ("eos", "pad"):
            token = own.get(role) or recipe[role]
            if token is None:
                raise RecipeError(
                    f"tokenize.{role}_token",
                    f"{path} names no {role} token (no {ROLE_FILES[0]} beside it and none of "
                    f"{', '.join(EOS_NAMES if role == 'eos' else PAD_NAMES)}); set "
                    f"tokenize.{role}_token to one of its tokens"
                    + (" (the eos token works for padding)" if role == "pad" else ""),
                )
            if self.tok.token_to_id(token) is None:
                raise RecipeError(f"tokenize.{role}_token", f"{token!r} is not in {path}'s vocab")
            self.roles[role] = token
            self.role_source[role] = "tokenizer" if own.get(role) else "recipe"
        self.eos_id = int(self.tok.token_to_id(self.roles["eos"]))
        self.pad_id = int(self.tok.token_to_id(self.roles["pad"]))
        self.vocab_size = int(self.tok.get_vocab_size(with_added_tokens=True))

    def encode_batch(self, texts: list[str]) -> list[list[int]]:
        """Each text's ids as the library encodes it, less a final eos its post-processor
        added (the stage appends eos to every document)."""
        out = []
        for enc in self.tok.encode_batch(texts):
            ids = enc.ids
            out.append(ids[:-1] if ids and ids[-1] == self.eos_id else ids)
        return out

    def pretrained_files(self) -> dict[str, bytes]:
        """The `save_pretrained` folder: tokenizer.json as given, and the eos / pad roles for
        transformers' PreTrainedTokenizerFast (AutoTokenizer.from_pretrained loads it)."""

        def js(obj: Any) -> bytes:
            return (json.dumps(obj, ensure_ascii=False, indent=2, sort_keys=True) + "\n").encode()

        roles = {"eos_token": self.roles["eos"], "pad_token": self.roles["pad"]}
        config = {"tokenizer_class": "PreTrainedTokenizerFast", **roles}
        return {
            "tokenizer.json": self.path.read_bytes(),
            "tokenizer_config.json": js(config),
            "special_tokens_map.json": js(roles),
        }
