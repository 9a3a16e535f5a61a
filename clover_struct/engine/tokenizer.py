"""A thin wrapper over a `tokenizers.Tokenizer` (tokenizer.json).

It knows the raw bytes of every token, which is what a token-level automaton
needs: outlines-core walks its regex DFA over those bytes. It knows nothing of
schemas; it only says which ids are special so callers can keep them out.
"""

from __future__ import annotations

import functools
import json
from functools import cache
from pathlib import Path

from tokenizers import Tokenizer as _HFTokenizer

from .errors import CheckpointError

# Names under which checkpoints spell their diffusion mask and padding tokens
# (LLaDA, LLaDA2, SDAR, Dream, Fast-dLLM v2, ours); the ids are always looked up.
MASK_NAMES = ("<|mask|>", "<|mdm_mask|>", "<|MASK|>", "|<MASK>|", "<mask>", "[MASK]")
PAD_NAMES = ("<|pad|>", "<pad>", "[PAD]")
EOS_NAMES = ("<|endoftext|>", "<|eos|>", "</s>", "<eos>", "[SEP]")
BOS_NAMES = ("<bos>", "<s>", "<|begin_of_text|>")  # chat templates write it by name (Gemma's start with it)


@cache
def _byte_decoder() -> dict[str, int]:
    """Inverse of the GPT-2 byte-level alphabet: printable stand-in char -> byte."""
    printable = [*range(ord("!"), ord("~") + 1), *range(0xA1, 0xAC + 1), *range(0xAE, 0xFF + 1)]
    table, extra = {}, 0
    for b in range(256):
        if b in printable:
            table[chr(b)] = b
        else:
            table[chr(256 + extra)] = b
            extra += 1
    return table


def _decoder_types(spec: dict | None) -> set[str]:
    if not spec:
        return set()
    if spec.get("type") == "Sequence":
        return {t for d in spec.get("decoders", []) for t in _decoder_types(d)}
    return {spec.get("type")}


def _default_template(value, source: Path) -> str:
    """tokenizer_config.json's chat_template: a template, or a list of named ones whose
    "default" is the one used."""
    if isinstance(value, list):
        named = {t.get("name"): t.get("template") for t in value if isinstance(t, dict)}
        value = named.get("default")
    if not isinstance(value, str):
        raise CheckpointError(f"{source}: chat_template is neither a template nor a list of named templates with "
                              "a 'default' one; fix it or remove it")
    return value


class Tokenizer:
    def __init__(self, tokenizer: _HFTokenizer, special_names: dict[str, str] | None = None):
        self._tok = tokenizer
        self.chat_template: str | None = None  # a Jinja chat template: chat_template.jinja or tokenizer_config.json
        self.chat_template_file: Path | None = None   # the file it was read from
        self._vocabulary: dict[bytes, list[int]] | None = None   # vocabulary_map's, built once
        spec = json.loads(tokenizer.to_str())
        self._byte_level = "ByteLevel" in _decoder_types(spec.get("decoder"))
        self.special_ids = {t["id"] for t in spec.get("added_tokens", []) if t.get("special")}
        names = special_names or {}
        self.mask_id = self._find(names.get("mask_token"), MASK_NAMES)
        self.pad_id = self._find(names.get("pad_token"), PAD_NAMES)
        self.eos_id = self._find(names.get("eos_token"), EOS_NAMES)
        self.bos_id = self._find(names.get("bos_token"), BOS_NAMES)

    @classmethod
    def from_file(cls, path: str | Path) -> "Tokenizer":
        path = Path(path)
        try:
            tok = _HFTokenizer.from_file(str(path))
        except Exception as e:  # tokenizers raises a bare Exception on bad JSON
            raise CheckpointError(f"{path}: not a readable tokenizer.json ({e}); "
                                  "save one with tokenizers' Tokenizer.save()") from e
        names, template, source = {}, None, None
        config = path.parent / "tokenizer_config.json"
        if config.is_file():
            try:
                settings = json.loads(config.read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
                raise CheckpointError(f"{config}: not valid JSON ({e}); copy the checkpoint's file again") from e
            if not isinstance(settings, dict):
                raise CheckpointError(f"{config}: expected a JSON object")
            for key, value in settings.items():
                if key in ("mask_token", "pad_token", "eos_token", "bos_token") and value is not None:
                    name = value.get("content") if isinstance(value, dict) else value
                    if not isinstance(name, str):
                        raise CheckpointError(f"{config}: {key} is {value!r}; expected a token's text, or an "
                                              "object with its 'content'")
                    names[key] = name
                elif key == "chat_template" and value is not None:
                    template, source = _default_template(value, config), config
        jinja = path.parent / "chat_template.jinja"   # where transformers saves it, ahead of the config's
        if jinja.is_file():
            try:
                template, source = jinja.read_text(encoding="utf-8"), jinja
            except (OSError, UnicodeDecodeError) as e:
                raise CheckpointError(f"{jinja}: cannot be read ({e}); copy the checkpoint's file again") from e
        out = cls(tok, names)
        out.chat_template, out.chat_template_file = template, template and source
        return out

    def _find(self, explicit: str | None, candidates: tuple[str, ...]) -> int | None:
        for name in ([explicit] if explicit else []) + list(candidates):
            i = self._tok.token_to_id(name)
            if i is not None:
                return i
        return None

    @property
    def vocab_size(self) -> int:
        return self._tok.get_vocab_size(with_added_tokens=True)

    def encode(self, text: str) -> list[int]:
        return self._tok.encode(text, add_special_tokens=False).ids

    def decode(self, ids: list[int]) -> str:
        return self._tok.decode(list(ids), skip_special_tokens=False)

    def save(self, path: str | Path) -> None:
        self._tok.save(str(path))

    def token_to_id(self, token: str) -> int | None:
        return self._tok.token_to_id(token)

    def token_bytes(self, i: int) -> bytes:
        """The bytes token `i` contributes to decoded text."""
        token = self._tok.id_to_token(i)
        if token is None:
            raise ValueError(f"token id {i} is outside the vocabulary of {self.vocab_size}")
        if i in self.special_ids:
            return token.encode()
        if self._byte_level:
            table = _byte_decoder()
            if all(c in table for c in token):
                return bytes(table[c] for c in token)
            return token.encode()
        if len(token) == 6 and token.startswith("<0x") and token.endswith(">"):
            return bytes([int(token[3:5], 16)])  # sentencepiece byte fallback
        return token.replace("\u2581", " ").encode()

    def vocabulary_map(self) -> dict[bytes, list[int]]:
        """Token bytes -> ids, without special tokens: the map outlines-core's Vocabulary takes
        (built once, shared by every caller: read it, never change it)."""
        if self._vocabulary is None:
            out: dict[bytes, list[int]] = {}
            for i in range(self.vocab_size):
                if i not in self.special_ids and self._tok.id_to_token(i) is not None:
                    out.setdefault(self.token_bytes(i), []).append(i)
            out.pop(b"", None)
            self._vocabulary = out
        return self._vocabulary

    @functools.cached_property
    def longest_token(self) -> int:
        """Bytes of the longest token (no fewer than the letters it spells)."""
        return max(map(len, self.vocabulary_map()), default=1)

    def outlines_vocabulary(self, eos_id: int):
        """An outlines_core.Vocabulary whose end token is `eos_id` (for slots: the pad id)."""
        from outlines_core import Vocabulary

        return Vocabulary(eos_id, self.vocabulary_map())
