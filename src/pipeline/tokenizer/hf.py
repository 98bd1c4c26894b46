"""A Tokenizer as a Hugging Face `tokenizer.json` (byte-level BPE): its bytes (`dumps`), the files
of the folder `save_pretrained` would write (`pretrained_files`, so
`AutoTokenizer.from_pretrained(folder)` loads it), and `load` of a tokenizer.json a recipe names
(reading user input, as sources/ do). Writing them into a run folder is the tokenize stage's.

The file holds a BPE model (vocab in GPT-2's byte-to-unicode alphabet, merges as "a b"
strings), a `Split` pre-tokenizer with our pattern followed by `ByteLevel(use_regex=False)`,
a ByteLevel decoder and the special tokens as added tokens, so `tokenizers.Tokenizer.from_file`
and transformers' `PreTrainedTokenizerFast(tokenizer_file=..., **special_tokens_map(tok))` give
the same ids as we do. Writing the folder needs no transformers: the files are plain JSON.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any

import regex

from pipeline.errors import DataError
from pipeline.text_files import read_json_file
from pipeline.tokenizer.bpe import Tokenizer
from pipeline.tokenizer.model import EOS, PAD, BpeModel
from pipeline.tokenizer.pretokenize import GPT2_PATTERN, compile_pattern


@lru_cache(maxsize=1)
def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible byte -> printable character map (space is 'Ġ', newline 'Ċ')."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
    bs += list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs, strict=False)}


def _token_str(raw: bytes) -> str:
    table = bytes_to_unicode()
    return "".join(table[b] for b in raw)


def to_json(tok: Tokenizer) -> dict[str, Any]:
    vocab = {
        _token_str(tok.id_bytes[i]): i
        for i in range(tok.vocab_size)
        if i not in tok.specials.values()
    }
    merges = [f"{_token_str(tok.id_bytes[a])} {_token_str(tok.id_bytes[b])}" for a, b in tok.merges]
    added = [
        {
            "id": i,
            "content": s,
            "single_word": False,
            "lstrip": False,
            "rstrip": False,
            "normalized": False,
            "special": True,
        }
        for s, i in tok.specials.items()
    ]
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": None,
        "pre_tokenizer": {
            "type": "Sequence",
            "pretokenizers": [
                {
                    "type": "Split",
                    "pattern": {"Regex": tok.pattern},
                    "behavior": "Isolated",
                    "invert": False,
                },
                {
                    "type": "ByteLevel",
                    "add_prefix_space": False,
                    "trim_offsets": True,
                    "use_regex": False,
                },
            ],
        },
        "post_processor": None,
        "decoder": {
            "type": "ByteLevel",
            "add_prefix_space": False,
            "trim_offsets": True,
            "use_regex": False,
        },
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": None,
            "continuing_subword_prefix": None,
            "end_of_word_suffix": None,
            "fuse_unk": False,
            "byte_fallback": False,
            "ignore_merges": False,
            "vocab": vocab,
            "merges": merges,
        },
    }


def dumps(tok: Tokenizer) -> bytes:
    """Deterministic bytes of tokenizer.json (vocab in id order)."""
    return (json.dumps(to_json(tok), ensure_ascii=False, indent=1) + "\n").encode("utf-8")


PRETRAINED_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")


def special_tokens_map(tok: Tokenizer) -> dict[str, Any]:
    """transformers' names for our specials: eos, pad, and the rest (the PII placeholders) as
    additional special tokens, in id order. Pass as keyword arguments to PreTrainedTokenizerFast."""
    extra = [
        s for s, _ in sorted(tok.specials.items(), key=lambda kv: kv[1]) if s not in (EOS, PAD)
    ]
    return {"eos_token": EOS, "pad_token": PAD, "additional_special_tokens": extra}


def tokenizer_config(tok: Tokenizer) -> dict[str, Any]:
    """tokenizer_config.json as transformers 4.x writes it (5.x reads it too). No bos/unk token,
    no max length, and no cleanup of spaces on decode: decode(encode(x)) == x as with ours."""
    decoder = {
        str(i): {
            "content": s,
            "lstrip": False,
            "normalized": False,
            "rstrip": False,
            "single_word": False,
            "special": True,
        }
        for s, i in sorted(tok.specials.items(), key=lambda kv: kv[1])
    }
    return {
        "added_tokens_decoder": decoder,
        "bos_token": None,
        "clean_up_tokenization_spaces": False,
        # the generic class: it keeps tokenizer.json's pre-tokenizer, where a GPT-2 class would not
        "tokenizer_class": "PreTrainedTokenizerFast",
        "unk_token": None,
        **special_tokens_map(tok),
    }


def pretrained_files(tok: Tokenizer, tokenizer_json: bytes) -> dict[str, bytes]:
    """The files of a `save_pretrained` folder: name -> deterministic bytes."""

    def js(obj: Any) -> bytes:
        return (json.dumps(obj, ensure_ascii=False, indent=2, sort_keys=True) + "\n").encode()

    return {
        "tokenizer.json": tokenizer_json,
        "tokenizer_config.json": js(tokenizer_config(tok)),
        "special_tokens_map.json": js(special_tokens_map(tok)),
    }


def _pattern(pre: Any, where: str) -> str:
    """The split regex a pre-tokenizer block describes (ours, or plain GPT-2 ByteLevel)."""
    if not isinstance(pre, dict):
        raise DataError(where, "pre_tokenizer is missing; expected byte-level BPE")
    if pre.get("type") == "ByteLevel" and pre.get("use_regex", True):
        return GPT2_PATTERN
    if pre.get("type") == "Sequence":
        items = pre.get("pretokenizers") or []
        if (
            isinstance(items, list)
            and len(items) == 2
            and all(isinstance(it, dict) for it in items)
            and items[0].get("type") == "Split"
            and items[1].get("type") == "ByteLevel"
            and not items[1].get("use_regex", True)
        ):
            pattern = items[0].get("pattern")
            found = pattern.get("Regex") if isinstance(pattern, dict) else None
            if isinstance(found, str):
                return found
    raise DataError(
        where,
        f"unsupported pre_tokenizer {pre.get('type')!r}; expected ByteLevel "
        "or Sequence[Split(Regex), ByteLevel(use_regex=false)]",
    )


def _specials(added: Any, where: str) -> dict[str, int]:
    """{content: id} of the special added tokens; DataError naming the first bad entry."""
    if added is None:
        return {}
    if not isinstance(added, list):
        raise DataError(where, "added_tokens must be a list")
    out = {}
    for i, t in enumerate(added):
        if not isinstance(t, dict):
            raise DataError(where, f"added_tokens[{i}] is not an object")
        if not t.get("special"):
            continue
        if not isinstance(t.get("content"), str) or not isinstance(t.get("id"), int):
            raise DataError(where, f"added_tokens[{i}] needs a string 'content', an integer 'id'")
        out[t["content"]] = t["id"]
    return out


def load(path: Path) -> Tokenizer:
    """Read a byte-level BPE tokenizer.json (ours or GPT-2 style); DataError if it is not one."""
    where = str(path)
    obj = read_json_file(Path(path), "tokenizer.json")
    model = obj.get("model") if isinstance(obj, dict) else None
    if not isinstance(model, dict) or model.get("type") != "BPE":
        raise DataError(where, "model.type must be 'BPE'")
    pattern = _pattern(obj.get("pre_tokenizer"), where)
    inv = {c: b for b, c in bytes_to_unicode().items()}
    vocab: dict[str, int] = model.get("vocab") or {}
    try:
        byte_ids = [vocab[inv_c] for inv_c in (bytes_to_unicode()[b] for b in range(256))]
        id_bytes = {i: bytes(inv[c] for c in s) for s, i in vocab.items()}
        merges = [m.split(" ") if isinstance(m, str) else m for m in model.get("merges") or []]
        pairs = [(vocab[a], vocab[b]) for a, b in merges]
        merged_ids = [vocab[a + b] for a, b in merges]
    except (KeyError, ValueError, TypeError) as exc:
        raise DataError(where, f"not a byte-level BPE vocabulary (missing {exc})") from None
    specials = _specials(obj.get("added_tokens"), where)
    try:
        compile_pattern(pattern)
    except (regex.error, ValueError, TypeError) as exc:
        raise DataError(where, f"the Split regex does not compile ({exc})") from None
    ids = [*vocab.values(), *specials.values()]
    if not all(isinstance(i, int) and not isinstance(i, bool) and 0 <= i < 1 << 31 for i in ids):
        raise DataError(where, "token ids must be integers in [0, 2^31)")
    size = max(ids) + 1
    table = [id_bytes.get(i, b"") for i in range(size)]
    model = BpeModel.build(
        pairs,
        list(specials),
        pattern,
        vocab=table,
        byte_ids=byte_ids,
        merged_ids=merged_ids,
        special_ids=list(specials.values()),
    )
    return Tokenizer.from_model(model)
