"""What a tokenizer's tokens write, as tables the slot automata and verbatim slots share.

Built once per tokenizer and kept while it lives (`per_tokenizer`): the outlines-core
vocabulary a pattern compiles over, and how many characters of a JSON string each token
starts. Knows nothing of schemas, canvases or models.
"""

from __future__ import annotations

import weakref

import numpy as np

# outlines-core 0.2.14 drops every token that leads from a final state to a non-final
# one (with tokens a, b, `a(?:bc)?` cannot go on with b after a; a float cannot take a
# lone "."). So each pattern is compiled followed by the byte 0x01, which no value
# contains: no state of the pattern itself is final, and a state is final iff it can
# take `END`, a token id of our own that spells 0x01.
END = 2**31 - 2

_CACHES: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()     # tokenizer -> {key: table}


def per_tokenizer(tokenizer) -> dict:
    """A dict kept as long as `tokenizer` lives, for tables derived from it."""
    return _CACHES.setdefault(tokenizer, {})


def letter_tokens(tokenizer, text: str) -> int:
    """The most tokens a letter of `text` takes: the fewest tokens whose bytes spell its UTF-8
    (1 for a letter that is a token of its own; 3 for a CJK character a byte-level vocabulary
    lacks). A free string of max_length N holds N letters of the text at N times this."""
    known, pieces = per_tokenizer(tokenizer).setdefault("letters", {}), tokenizer.vocabulary_map()
    letters = {c for c in text if not c.isascii() and c.isalpha()}
    for letter in letters - known.keys():
        spelt = letter.encode("utf-8")
        fewest = [0] + [len(spelt)] * len(spelt)   # fewest[k]: tokens spelling its first k bytes (at worst
        for end in range(1, len(spelt) + 1):       # one a byte; a byte no token spells is counted so too)
            fewest[end] = min([fewest[end]] + [fewest[k] + 1 for k in range(end) if spelt[k:end] in pieces])
        known[letter] = fewest[-1]
    return max((known[c] for c in letters), default=1)


def outlines_vocabulary(tokenizer, pad: int, mask: int):
    """(outlines-core Vocabulary, {bytes: ids}) of `tokenizer`: pad is the end token, special
    tokens are left out, and the byte 0x01 also spells `END`, the end-of-value sentinel."""
    per = per_tokenizer(tokenizer)
    if ("vocabulary", pad, mask) not in per:
        from outlines_core import Vocabulary
        banned = set(tokenizer.special_ids) | {tokenizer.mask_id, tokenizer.pad_id, tokenizer.eos_id, pad, mask}
        vmap = {b: ids for b, ids in ((b, [i for i in ids if i not in banned])
                                      for b, ids in tokenizer.vocabulary_map().items()) if ids}
        with_end = {**vmap, b"\x01": vmap.get(b"\x01", []) + [END]}
        per["vocabulary", pad, mask] = Vocabulary(pad, with_end), vmap
    return per["vocabulary", pad, mask]


def unit_starts(tokenizer, vmap: dict, vocab_size: int) -> tuple[np.ndarray, np.ndarray]:
    """Characters each token starts inside a JSON string, for each entry flag.

    Flag f = 2*inside + after_backslash. A character starts at a byte inside the
    quotes that is not a UTF-8 continuation byte, not the letter of an escape and not
    the closing quote, so `\\"` and `é` count one each and `null` counts none.
    Returns (starts[f, token], exit_flag[f, token]); cached per tokenizer.
    """
    cache = per_tokenizer(tokenizer)
    if ("starts", vocab_size) not in cache:
        data = np.full((vocab_size, max(map(len, vmap))), -1, np.int16)   # -1: past the token's end
        for b, ids in vmap.items():
            data[ids, :len(b)] = np.frombuffer(b, np.uint8)
        starts = np.zeros((4, vocab_size), np.int32)   # (added to counts up to a maxLength past 2**15)
        inside = np.repeat(np.array([[0], [0], [1], [1]], bool), vocab_size, 1)
        escape = np.repeat(np.array([[0], [1], [0], [1]], bool), vocab_size, 1)
        for col in data.T:                                      # V: tokens, one byte column at a time
            real = col >= 0
            quote, slash, cont = col == 0x22, col == 0x5C, (col >= 0x80) & (col < 0xC0)
            letter = real & escape
            count = real & inside & ~letter & ~quote & ~cont
            starts += count
            escape = np.where(real, count & slash, escape)
            inside = np.where(real & ~letter & quote, ~inside, inside)
        cache["starts", vocab_size] = (starts, 2 * inside + escape)
    return cache["starts", vocab_size]
