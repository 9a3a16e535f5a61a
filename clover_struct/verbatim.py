"""Verbatim slots: strings the decoder keeps to pieces of the input text, as written.

A field marked `Field(json_schema_extra={"verbatim": True})` holds what the text says,
copied (an identifier, a time or limit as written, a stated reason). Its slot automaton
(constraints.py) says what the value may look like; `Verbatim` adds where it may come
from: of the tokens the automaton allows, only those that carry the value on along an
occurrence in the text. The text is read as a JSON string holds it (escaped), with every
run of whitespace as one space, and none where a line end cuts a coordinate (`N2` /
`92000E1222500` in a notice wrapped at a fixed width: WRAP_IN_COORDINATE). A piece is
not empty (a nullable field says it is absent with null), starts and ends at a word edge:
not inside a run of ASCII digits or of letters, the letters of other alphabets (é, a
combining accent) counting as letters (`AB12` is no piece of `AB123`, `caf` none of `café`;
`N` and `005` are pieces of `4730N005`, and in Chinese any run of characters is a piece),
neither starts nor ends with a space, and does not start at a dash right after a digit (a
range's: 500-1500 holds no -1500). Where the text holds no piece the pattern accepts,
the slot goes on under its automaton alone, so a verbatim slot is never stuck where its
automaton is not; but a union variant with a copy it must make and the text cannot give (a
circle's radius where none is stated) is not chosen while another variant or null can be
(`pieces_in_turn`, rows.Row.unreachable).

Matching is done once per text for the whole vocabulary: every token's bytes are looked
up at every offset (numpy, one pass per token length), so a decoding step only gathers
the tokens found at the offsets where the value so far ends. Knows nothing of torch or
models, like constraints.py.
"""

from __future__ import annotations

import bisect
import json
import re
import unicodedata
import weakref

import numpy as np

from .constraints import SlotAutomaton
from .patterns import CHAR
from .vocab import per_tokenizer

FREE = "free"       # `ends` once the copy is given up: the slot's automaton alone decides
_FAR = 1 << 30
_FREE_TEXT = (CHAR + "*", f'null|"(?:{CHAR}*)"')   # the patterns of strings that have none
# Words run together with a space: a pattern that takes any of these is prose (a name, a place),
# whose extent only the model can judge, and is copied as free text is.
_PROSE = ("ab cd", "Ab Cd", "AB CD")
_IS_PROSE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()   # slot automaton -> prose or not
_ADDRESS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()   # slot automaton -> address_kind()
# Addresses written as one run with separators inside: an IPv6 address, an e-mail address. A
# pattern that takes one of these but not a bare word is no looser pattern that takes anything.
_JOINED = ("2001:db8::1", "j.doe@example.org")
# What may stand between two pieces of one list in the text: punctuation and spaces, and a
# joining word or an item number or both ("5130N 00010W - 5140N", "... TO 5140N", "\n2. 5140N",
# "；（2）北纬31.02度").
_SEP = r"(?:[\W_]|[至到])*"
_GAP = rf"{_SEP}(?:(?:(?<!\w)(?:to|then|thence|and|\d{{1,2}}[.)])(?!\w)|[(（]\d{{1,2}}[)）]){_SEP}){{0,2}}"
_BETWEEN, _BEFORE = re.compile(_GAP, re.I), re.compile(rf"(?:{_GAP})\Z", re.I)


class Pieces:
    """What each token writes of a JSON string's content. A content is a byte string, numbered
    for matching; per token id, three readings of its bytes: `body` (all of them), `opened`
    (after a leading quote: it opens a nullable string), `closed` (before a trailing quote: it
    closes one). EMPTY: no bytes; NEVER: no such reading, or bytes a JSON string never holds
    as they are (control characters). `tokens(reading, contents)` inverts a reading."""

    READINGS = ("body", "opened", "closed")

    def __init__(self, tokenizer, vocab_size: int):
        found: dict[bytes, int] = {}
        pairs: dict[str, list] = {r: [] for r in self.READINGS}     # (content or b"", token id)
        self.quote_first = np.zeros(vocab_size, bool)
        for b, ids in tokenizer.vocabulary_map().items():
            ids = [i for i in ids if i < vocab_size]
            self.quote_first[ids] = b[:1] == b'"'
            for reading, piece in (("body", b), ("opened", b[1:] if b[:1] == b'"' else None),
                                   ("closed", b[:-1] if b[-1:] == b'"' else None)):
                if piece is not None and min(piece, default=0x20) >= 0x20:
                    pairs[reading] += [(found.setdefault(piece, len(found)) if piece else None, i) for i in ids]
        self.content_of = found                 # bytes -> content
        self.EMPTY = n = len(found)
        self.NEVER = n + 1
        self.unquoted = np.flatnonzero(~self.quote_first)
        self.lengths = np.array([len(c) for c in found] + [0, 0], np.int64)
        self._inverse = {}
        for reading, got in pairs.items():
            content = np.array([n if c is None else c for c, _ in got], np.int64)
            ids = np.array([i for _, i in got], np.int64)
            of = np.full(vocab_size, n + 1, np.int64)     # token id -> content of this reading
            of[ids] = content
            setattr(self, reading, of)
            order = np.argsort(content, kind="stable")
            cuts = np.searchsorted(content[order], np.arange(n + 3))
            single = np.diff(cuts) == 1
            only = np.full(n + 2, -1, np.int64)       # content -> its one token, if it has one
            only[single] = ids[order][cuts[:-1][single]]
            self._inverse[reading] = (cuts, ids[order], only, bool((np.diff(cuts) > 1).any()))
        self.by_length: dict[int, tuple[np.ndarray, np.ndarray]] = {}   # L -> (sorted keys, content ids)
        for length in sorted({len(c) for c in found}):
            keys = np.array([c for c in found if len(c) == length], dtype=f"S{length}")
            ids = np.array([found[c] for c in keys.tolist()], np.int64)
            order = np.argsort(keys)
            self.by_length[length] = (keys[order], ids[order])

    def spelt(self, text: bytes) -> list[int] | None:
        """Token ids writing `text` a byte each (their body reading); None where a byte has none."""
        tokens = [self.tokens("body", [self.content_of.get(text[k:k + 1], self.NEVER)]) for k in range(len(text))]
        return [int(t[0]) for t in tokens] if all(map(len, tokens)) else None

    def tokens(self, reading: str, contents) -> np.ndarray:
        """The token ids whose `reading` is one of `contents`."""
        cuts, ids, only, shared = self._inverse[reading]
        contents = np.asarray(contents, np.int64)
        if not shared:          # each content is one token's or none: one lookup
            found = only[contents]
            return found[found >= 0]
        first, counts = cuts[contents], cuts[contents + 1] - cuts[contents]
        offsets = np.repeat(first - np.cumsum(counts) + counts, counts)
        return ids[offsets + np.arange(counts.sum())]


def pieces(tokenizer, vocab_size: int) -> Pieces:
    """The tokenizer's Pieces, built once per tokenizer and row width."""
    cache = per_tokenizer(tokenizer)
    if ("pieces", vocab_size) not in cache:
        cache["pieces", vocab_size] = Pieces(tokenizer, vocab_size)
    return cache["pieces", vocab_size]


# A line end that cuts a coordinate written hemisphere first, as a notice wrapped at a fixed
# width does (`N2\r\n92000E1222500`, `E0\n8946`), or a number just before its decimal point
# (`0115354\n.9W`): read as if the line went on. Group 1 is what the line end follows.
WRAP_IN_COORDINATE = re.compile(r"((?<![A-Za-z])[NSEWnsew]\d+(?=\r?\n\d)|\d(?=\r?\n\.\d))\r?\n")


def unwrapped(text: str) -> str:
    """The text with no line end inside a coordinate (WRAP_IN_COORDINATE), as copies read it."""
    return WRAP_IN_COORDINATE.sub(r"\1", text)


def folded(text: str) -> tuple[bytes, list[int]]:
    """The text as a JSON string's content holds it (escaped, UTF-8), each run of whitespace one
    space, none at the ends, none where a line end cuts a coordinate (WRAP_IN_COORDINATE); and
    per byte, the index in `text` of the character it comes from (a folded space: its run's
    first), with one more entry, the text's length."""
    data, origin, space = bytearray(), [], None
    cut = {k for m in WRAP_IN_COORDINATE.finditer(text) for k in range(m.end(1), m.end())}   # line ends dropped
    for k, ch in enumerate(text):
        if k in cut:
            continue
        if ch.isspace():
            space = k if space is None else space
            continue
        if space is not None and data:
            data += b" "
            origin.append(space)
        space = None
        piece = json.dumps(ch, ensure_ascii=False)[1:-1].encode() if ch < " " or ch in '"\\' else ch.encode()
        data += piece
        origin += [k] * len(piece)
    return bytes(data), origin + [len(text)]


def _alphabetic(data: bytes) -> np.ndarray:
    """Per byte of UTF-8 `data`, whether it is part of a letter or mark of an alphabet other than
    ASCII's (é, ü, a combining accent, Greek, Cyrillic, Korean's Hangul) or a full-width letter
    or digit (ＥＧＬＬ, １２０): a word goes on through it. Scripts written without spaces between
    words (Chinese, Japanese) are not: a piece may start or end at any of their characters."""
    out = []
    for ch in data.decode("utf-8", "replace"):
        code, kind = ord(ch), unicodedata.category(ch)[0]
        spaced = code < 0x2E80 or 0xAC00 <= code <= 0xD7A3 or 0x3130 <= code <= 0x318F   # Hangul, its jamo
        wide = 0xFF10 <= code <= 0xFF5A and kind in "LN"                                   # ０-９, Ａ-Ｚ, ａ-ｚ
        out += [code > 127 and (spaced and kind in "LM" or wide)] * len(ch.encode())
    return np.array(out, bool)


class Source:
    """One text, matched against every content. `ends` is either the offsets where the value
    so far may end (a tuple), or, before its first character, the offset it may start from (an
    int: any word edge there or later). `found(ends)`: the contents that occur there;
    `after(ends, c)`: where content c ends when it follows on from `ends`; `may_end(ends)`:
    whether a piece written so far may end there (something was copied and a word edge is
    among the offsets); `span(ends, content)`: where a copied piece stands in the text."""

    def __init__(self, text: str, pieces: Pieces):
        self.data, self.origin = folded(text)
        data = np.frombuffer(self.data, np.uint8)
        pos, hit = [np.zeros(0, np.int64)], [np.zeros(0, np.int64)]
        for length, (keys, ids) in pieces.by_length.items():
            if length > len(data):
                break
            windows = np.ascontiguousarray(np.lib.stride_tricks.sliding_window_view(data, length))
            windows = windows.view(f"S{length}").ravel()
            k = np.minimum(np.searchsorted(keys, windows), len(keys) - 1)
            at = np.flatnonzero(keys[k] == windows)
            pos.append(at)
            hit.append(ids[k[at]])
        pos, hit = np.concatenate(pos), np.concatenate(hit)
        letter = (((data | 32) >= 97) & ((data | 32) <= 122)) | _alphabetic(self.data)
        kind = np.select([(data >= 48) & (data <= 57), letter], [1, 2], 0)
        space = data == 32
        self.edge = np.ones(len(data) + 1, bool)          # not inside a run of ASCII digits or of letters,
        self.edge[1:-1] = (kind[:-1] != kind[1:]) | (kind[1:] == 0)
        # nor inside an escape (\u0012: no piece 0012): past the first byte of a character written from a backslash
        first = np.searchsorted(self.origin, self.origin[1:-1])   # per byte from the second: its character's first
        self.edge[1:-1] &= (first == np.arange(1, len(data))) | (data[first] != 92)
        self.begin = self.edge[:-1] & ~space              # a piece neither starts nor ends with a space,
        self.begin[1:] &= ~((data[1:] == 45) & (kind[:-1] == 1))   # nor at a dash after a digit (500-1500: no -1500)
        starting = self.begin[pos]
        self.edge[1:] &= ~space                           # (edge: where a piece may end)
        self.pieces, self.width = pieces, pieces.NEVER + 1
        order = np.lexsort((hit, pos))                    # by offset, then content
        self._hits, self._cuts = hit[order], np.searchsorted(pos[order], np.arange(len(data) + 2))
        order = np.lexsort((pos[starting], hit[starting]))   # value starts: by content, then offset
        self._starts = pos[starting][order]
        self._start_cuts = np.searchsorted(hit[starting][order], np.arange(self.width + 1))
        order = np.argsort(pos[starting], kind="stable")     # value starts: by offset
        self._start_at, self._start_hits = pos[starting][order], hit[starting][order]
        self._starting: dict[int, np.ndarray] = {}
        self._matches = set((pos * self.width + hit).tolist())   # content c at offset p: p * width + c

    def found(self, ends) -> np.ndarray:
        if isinstance(ends, int):
            if ends not in self._starting:
                self._starting[ends] = np.unique(self._start_hits[np.searchsorted(self._start_at, ends):])
            return self._starting[ends]
        if len(ends) == 1:
            return self._hits[self._cuts[ends[0]]:self._cuts[ends[0] + 1]]
        return np.concatenate([self._hits[self._cuts[e]:self._cuts[e + 1]] for e in ends])

    def span(self, ends, content: bytes) -> tuple[int, int] | None:
        """(start, end) in characters of the text of a piece copied as `content`: its earliest
        occurrence among those ending at `ends` where a piece may end, else its first; None if
        it occurs nowhere."""
        size = len(content)
        at = [e - size for e in self.piece_ends(ends or ()) if self.data[e - size:e] == content] or \
            [m.start() for m in re.finditer(b"(?=" + re.escape(content) + b")", self.data)
             if self.begin[m.start()] and self.edge[m.start() + size]]   # (a value repair put in)
        if not at or not size:
            return None
        return self.origin[at[0]], self.origin[at[0] + size - 1] + 1

    def piece_ends(self, ends) -> list[int]:
        """`ends` in order, those where a piece may end first: the copy of 7 that ends inside the
        BA72 of 'BA72 boards at gate 7' ends there too, as an unfinished piece."""
        return sorted(ends, key=lambda e: (not self.edge[e], e))

    def starts(self, lo: int, hi: int | None = None) -> list[int]:
        """The offsets from `lo` on (to `hi`, included) where a piece may start, in order."""
        at = self._start_at
        end = len(at) if hi is None else np.searchsorted(at, hi, side="right")
        return np.unique(at[np.searchsorted(at, lo):end]).tolist()

    def may_end(self, ends) -> bool:
        return isinstance(ends, tuple) and any(self.edge[e] for e in ends)

    def after(self, ends, c: int) -> tuple[int, ...]:
        if c == self.pieces.EMPTY:
            return ends
        length = int(self.pieces.lengths[c])
        if isinstance(ends, int):
            starts = self._starts[self._start_cuts[c]:self._start_cuts[c + 1]]
            return tuple((starts[np.searchsorted(starts, ends):] + length).tolist())
        return tuple(e + length for e in ends if e * self.width + c in self._matches)


class _SearchTooLong(Exception):
    pass


class Verbatim:
    """A verbatim slot bound to one text; used by the decoder like the SlotAutomaton it wraps.

    State: (automaton state, inside the quotes, ends): `ends` are the text offsets where the
    value so far may end (before its first character, the offset it may start from), or FREE.
    A nullable string's closing quote leaves the quotes with the ends of its piece, or, where
    the piece stops inside a word, leaves the text (inside, FREE).
    `allowed_mask` keeps the tokens that carry the copy on; `viable` looks further, for the
    token a decoder picks: whether a whole piece the pattern accepts can still follow (a
    search, so asked of one token, not of every allowed one; a model's first choice nearly
    always passes).
    """

    SEARCH = 4096   # states one `viable` search may visit before it gives up (and allows)

    def __init__(self, inner: SlotAutomaton, source: Source):
        self.inner, self.source, self.pieces = inner, source, source.pieces
        self.slot, self.budget, self.pad_id = inner.slot, inner.budget, inner.pad_id
        self.initial = (inner.initial, inner.slot.json_kind == "string", 0)
        self.patterned = inner.slot.pattern not in _FREE_TEXT and not self._prose()   # else: ends at any word edge
        self._tokens: dict = {}
        self._finish: dict = {}
        self._next: dict = {}
        self._ends: dict = {}
        self._longer: dict = {}

    def _prose(self) -> bool:
        """Whether the pattern takes words run together (_PROSE); asked once per slot automaton,
        which every text of its schema shares."""
        if self.inner not in _IS_PROSE:
            _IS_PROSE[self.inner] = any(map(self._takes, _PROSE))
        return _IS_PROSE[self.inner]

    def address_kind(self) -> str | None:
        """"web" where the pattern takes a web address (a uri or iri format, a URL type), "joined"
        where it takes an IPv6 or e-mail address but no bare word, else None."""
        if self.inner not in _ADDRESS:
            _ADDRESS[self.inner] = ("web" if self._takes("https://example.org/a") else
                                    "joined" if any(map(self._takes, _JOINED)) and not self._takes("word") else None)
        return _ADDRESS[self.inner]

    def _takes(self, text: str) -> bool:
        """Whether the automaton takes `text`, a token a byte, as a string's whole content (a
        nullable string's between quotes)."""
        ids = self.pieces.spelt(text.encode())
        if ids is not None and not self.initial[1]:
            quote = self.pieces.tokens("opened", [self.pieces.EMPTY]).tolist()[:1]   # a lone '"'
            ids = quote + ids + quote
        return ids is not None and self.inner.accepts(ids)

    def _copying(self, state, remaining: int, allow_empty: bool = False) -> np.ndarray:
        """Token ids the automaton allows that carry the copy on (pad where a value may end);
        remembered, as `viable` looks ahead where the decoder then goes."""
        key = (state, remaining, allow_empty)
        if key not in self._tokens:
            q, inside, ends = state
            p, src = self.pieces, self.source
            if not inside:     # a nullable string's start: `null` as is, or a quote and a piece
                toks = [p.unquoted, p.tokens("opened", src.found(ends)), p.tokens("opened", [p.EMPTY])]
            else:              # content found there; a nullable string's closing quote
                here = src.found(ends)
                toks = [p.tokens("body", here)]
                if self.slot.json_kind != "string":    # the closing quote after a piece that ends at an edge
                    toks.append(p.tokens("closed", [c for c in here.tolist() if src.may_end(src.after(ends, c))]))
                    if self._may_stop(state, remaining):
                        toks.append(p.tokens("closed", [p.EMPTY]))
            toks = np.concatenate(toks) if len(toks) > 1 else toks[0]
            mask = self.inner.allowed_mask(q, remaining, allow_empty=allow_empty)
            keep = toks[mask[toks]]
            if mask[self.pad_id] and (allow_empty or self._may_stop(state, remaining)):
                keep = np.append(keep, self.pad_id)     # an absent group needs no piece
            self._tokens[key] = keep
        return self._tokens[key]

    def allowed_mask(self, state, remaining: int, *, allow_empty: bool = False) -> np.ndarray:
        """As SlotAutomaton.allowed_mask, but a fresh (writable) array unless the copy is given up."""
        if state[2] != FREE:
            keep = self._copying(state, remaining, allow_empty)
            if len(keep):
                out = np.zeros(len(self.pieces.body), bool)
                out[keep] = True
                return out
        return self.inner.allowed_mask(state[0], remaining, allow_empty=allow_empty)

    def allowed(self, state, remaining: int, *, allow_empty: bool = False) -> np.ndarray:
        """As allowed_mask, as sorted token ids (no vocabulary-wide mask is made while copying)."""
        if state[2] != FREE:
            keep = self._copying(state, remaining, allow_empty)
            if len(keep):
                return np.unique(keep)
        return np.flatnonzero(self.inner.allowed_mask(state[0], remaining, allow_empty=allow_empty))

    def left_text(self, state) -> bool:
        """Whether the copy in `state` was given up: the value goes on under its pattern alone."""
        return state[1] and state[2] == FREE

    def copied_whole(self, state) -> bool:
        """Whether the value in `state` is whole as a copy: null, closed, or a piece of the text
        that ends at a word edge (the slot's automaton alone may end it elsewhere, never stuck)."""
        q, inside, ends = state
        return not inside or self.source.may_end(ends)

    def unbegun_free_text(self, state) -> bool:
        """Whether `state` is a free-text value's inside its quotes with nothing copied yet:
        where the decoder reads the whole piece at once (rows.best_copy)."""
        return not self.patterned and state[1] and isinstance(state[2], int)

    def following(self, state, size: int) -> set[bytes]:
        """The `size` bytes of the text after each offset where the copy in `state` may end."""
        ends = state[2]
        return {self.source.data[e:e + size] for e in ends} if isinstance(ends, tuple) else set()

    def viable(self, state, token: int, remaining: int) -> bool:
        """Whether, after `token`, a whole piece the pattern accepts fits the `remaining` positions."""
        if state[2] == FREE or token == self.pad_id:
            return True
        try:
            return self._can_finish(self.next(state, token), remaining, [self.SEARCH])
        except _SearchTooLong:
            return True

    def _can_finish(self, state, remaining: int, budget: list[int]) -> bool:
        """Depth first, over the tokens that carry the copy on. What it learns is kept per state
        as (most positions known too few, fewest known enough): the answer depends on the bytes
        written, not on how they were cut into tokens, so other cuts of the same text reuse it."""
        fails, works = self._finish.get(state, (-1, _FAR))
        if remaining >= works or remaining <= fails:
            return remaining >= works
        budget[0] -= 1
        if budget[0] < 0:
            raise _SearchTooLong
        q, inside, ends = state
        if ends == FREE:    # the token left the text: a value only if the pattern is done here
            return self.inner.is_final(q)
        if self.inner.is_final(q) and self._may_stop(state, remaining):
            ok = True
        else:
            ok = remaining > 0 and any(self._can_finish(self.next(state, t), remaining - 1, budget)
                                       for t in self._copying(state, remaining).tolist() if t != self.pad_id)
        self._finish[state] = (fails, remaining) if ok else (remaining, works)
        return ok

    def _may_stop(self, state, remaining: int) -> bool:
        """Whether the value may end here as far as the copy goes: before a nullable string's
        quote (null), once the copy is given up, or where a piece written so far ends, for a
        patterned value one that no longer piece the pattern accepts goes on from within the
        `remaining` positions: a piece is copied whole ('8 December 2028 07:00 UTC', not its
        date; '0.1246 W', not its number)."""
        q, inside, ends = state
        if not inside or ends == FREE:
            return True
        return self.source.may_end(ends) and (not self.patterned or any(
            self.source.edge[e] and not self._goes_on((q, inside, (e,)), remaining) for e in ends))

    def _goes_on(self, state, remaining: int) -> bool:
        """Whether a longer piece the pattern accepts whole follows on from `state` in the text."""
        key = (state, remaining)
        if key not in self._longer:
            q, inside, ends = state
            body = self.pieces.tokens("body", self.source.found(ends))
            carry = body[self.inner.allowed_mask(q, remaining)[body]]
            try:
                after = (self.next(state, t) for t in carry.tolist() if t != self.pad_id)
                self._longer[key] = remaining > 0 and any(
                    self._can_finish(s, remaining - 1, [self.SEARCH]) for s in after if s[2] != FREE)
            except _SearchTooLong:
                self._longer[key] = False
        return self._longer[key]

    def starting_from(self, state, offset: int, remaining: int, *, or_anywhere: bool = False, among=()):
        """A value not begun yet, its copy to start at `offset` of the text or later: a patterned
        string's at the first piece there that the pattern accepts whole (the next identifier,
        the next coordinate), free text's anywhere after; given `among` (the automata of the
        slots it copies after), not at one inside a longer piece of theirs or its own. Where no
        piece follows, the copy may not start (an item that may be absent then is), or,
        `or_anywhere`, starts anywhere."""
        q, inside, ends = state
        if not isinstance(ends, int):
            return state
        offset = max(ends, offset)
        if not (self.patterned and inside):
            return (q, inside, offset) if len(self.source.found(offset)) or not or_anywhere else state
        start = next((s for s in self.source.starts(offset)
                      if self._fits(state, s, remaining) and not (among and self._inside(s, among))), None)
        if start is not None:
            return q, inside, (start,)
        return state if or_anywhere else (q, inside, len(self.source.edge))   # past the text's end

    def starting_before(self, state, char: int):
        """A value not begun yet, its copy to start before character `char` of the text (where the
        piece it must precede begins), at a piece start from its lower bound on; unchanged where
        there is none."""
        q, inside, ends = state
        if not isinstance(ends, int):
            return state
        heads = tuple(self.source.starts(ends, bisect.bisect_left(self.source.origin, char) - 1))
        return (q, inside, heads) if heads else state

    def pieces_in_turn(self, most: int) -> int:
        """How many pieces the pattern accepts whole stand one after another in the text, up to
        `most` (`most` where the slot may be null): a union variant needing more copies than that
        is not chosen (rows.Row.unreachable): a circle's radius where the text states none (0 of
        1), a polygon's three vertices where it states one position (each required item of a
        list copies after the one before)."""
        if not (self.patterned and self.initial[1]):
            return most
        count, offset = 0, 0
        while count < most:
            start = self.starting_from(self.initial, offset, self.budget)[2]
            if not isinstance(start, tuple):
                break
            count, offset = count + 1, min(self._ends_from(start[0]))
        return count

    def starting_a_run(self, state, remaining: int, last: Verbatim, items: int = 1):
        """A list's first value, its copy to start where a run of the list's pieces starts: at a
        piece the pattern accepts whole that does not follow, with only separators between, a
        piece `last` (the item's last verbatim slot) accepts; of those, at one that starts a run
        of `items` items (the list's least) where any does, so a lone position (a NOTAM's Q-line
        centre) does not start a polygon's vertices. Unchanged where none does."""
        q, inside, ends = state
        if not (self.patterned and last.patterned and inside and isinstance(ends, int)):
            return state
        starts = [s for s in self.source.starts(ends)
                  if self._fits(state, s, remaining) and not self._inside(s, [last])]
        heads = tuple(s for s in starts if not last.ends_at(self.separated(s)))
        if not heads:   # each follows a piece of `last`: the items name their fields the other way round
            heads = tuple(s for s in starts if self._follows_a_lead(s, last))   # '东经121.47度、北纬31.31度'
        heads = tuple(s for s in heads if self._run(s, last, items) >= items) or heads
        return (q, inside, heads) if heads else state

    def starting_paired(self, state, remaining: int, partner: Verbatim):
        """A value not begun yet, its copy to start at a piece with one of `partner`'s (the slot
        that copies beside it) right before or after it, only separators between: a centre's
        latitude where a longitude stands with it, not the '0.5' of '0.5NM RADIUS CENTRED
        513045N 0000512W'. Unchanged where no piece has one."""
        q, inside, ends = state
        if not (self.patterned and partner.patterned and inside and isinstance(ends, int)):
            return state
        heads = tuple(s for s in self.source.starts(ends)
                      if self._fits(state, s, remaining) and not self._inside(s, [partner])
                      and (partner.ends_at(self.separated(s)) or any(partner.follows_on(e) for e in self._ends_from(s))))
        return (q, inside, heads) if heads else state

    def _inside(self, start: int, others=()) -> bool:
        """Whether the piece at `start` is part of a longer one that this pattern or one of
        `others` (patterned slots on the same text) accepts whole: one that starts before it
        and ends where its shortest piece ends or later (the '31.31' of '北纬31.31度', of
        '东经31.31度'; not the 'S40 58 00' after '23 00 S', which only overlaps it)."""
        own = self._ends_from(start)
        if not own:
            return False
        reach, end = self.budget * int(self.pieces.lengths.max()), min(own)
        return any(e >= end for v in {self, *others} if v.patterned
                   for s in v.source.starts(max(0, start - reach), start - 1) for e in v._ends_from(s))

    def _follows_a_lead(self, start: int, last: Verbatim) -> bool:
        """Whether the piece at `start` follows, with only separators between, a piece of `last`
        that does not itself follow one of this slot's: the first item of a list whose items
        are written last field first."""
        lead = last._ending_at(self.separated(start))
        return lead is not None and not self.ends_at(last.separated(lead))

    def _run(self, start: int, last: Verbatim, items: int) -> int:
        """How many items follow one another from `start` of the text, up to `items`: each this
        slot's piece, then `last`'s, with only separators between and before the next."""
        count, starts = 0, {start}
        while starts and count < items:
            count += 1
            ends = {e for s in starts for e in self._ends_from(s)}
            if last is not self:
                ends = {e for end in ends for s in last._next_to(end) for e in last._ends_from(s)}
            starts = {s for end in ends for s in self._next_to(end)}
        return count

    def _next_to(self, offset: int) -> list[int]:
        """Where a piece may start after `offset` of the text with only separators between."""
        data = self.source.data
        return [s for s in self.source.starts(offset, offset + 32)
                if _BETWEEN.fullmatch(data[offset:s].decode(errors="surrogateescape"))]

    def _fits(self, state, start: int, remaining: int) -> bool:
        """Whether a piece the pattern accepts whole starts at `start` of the text."""
        try:
            return self._can_finish((state[0], state[1], (start,)), remaining, [self.SEARCH])
        except _SearchTooLong:
            return True

    def separated(self, start: int) -> int:
        """Where the separators before `start` of the text begin (`start` if there are none)."""
        before = self.source.data[max(0, start - 32):start].decode(errors="surrogateescape")
        return start - len(_BEFORE.search(before).group().encode(errors="surrogateescape"))

    def follows_on(self, offset: int) -> bool:
        """Whether a piece the pattern accepts whole starts after `offset` of the text with only
        separators between."""
        return self.patterned and self.initial[1] and self._following(offset, self.initial, self.budget) is not None

    def _following(self, offset: int, state, remaining: int) -> int | None:
        """Where the first piece the pattern accepts whole (from `state`) starts after `offset`
        of the text with only separators between; None where none does."""
        return next((s for s in self._next_to(offset) if self._fits(state, s, remaining)), None)

    def ends_at(self, offset: int) -> bool:
        """Whether a piece the pattern accepts whole ends at `offset` of the text."""
        return self._ending_at(offset) is not None

    def _ending_at(self, offset: int, floor: int = 0) -> int | None:
        """Where the longest piece the pattern accepts whole that ends at `offset` of the text
        starts, from `floor` on; None where none does."""
        reach = self.budget * int(self.pieces.lengths.max())     # the longest a piece can be
        return next((start for start in self.source.starts(max(floor, offset - reach), offset - 1)
                     if offset in self._ends_from(start)), None)

    def beside(self, state, piece: tuple[int, int], floor: int, remaining: int):
        """A value not begun yet, its copy to start at the piece the pattern accepts whole right
        next to `piece` ((start, end) of the text), with only separators between: the one just
        before it where that starts at `floor` or later (past what an item before copied), else
        the one just after it; where neither is, at any piece not inside `piece` ('lat 40.71
        long -74.00': the longitude is not the latitude's own '40.71'). None where no piece is,
        or for free text."""
        q, inside, ends = state
        if not (self.patterned and inside and isinstance(ends, int)):
            return None
        start = self._ending_at(self.separated(piece[0]), max(floor, ends))
        if start is None:
            start = self._following(piece[1], state, remaining)
        if start is not None:
            return q, inside, (start,)
        others = tuple(s for s in self.source.starts(ends)   # whole pieces: '-74.00', not its '74.00'
                       if not piece[0] <= s < piece[1] and self._fits(state, s, remaining) and not self._inside(s))
        return (q, inside, others) if others else None

    def _ends_from(self, start: int) -> set[int]:
        """Where the pieces the pattern accepts whole that start at `start` end (a bounded search)."""
        if start not in self._ends:
            found, seen, todo = set(), set(), [(self.inner.initial, True, (start,))]
            while todo and len(seen) < self.SEARCH:
                state = todo.pop()
                if state in seen or state[2] in (FREE, ()):
                    continue
                seen.add(state)
                if self.inner.is_final(state[0]):
                    found.update(e for e in state[2] if self.source.edge[e])
                todo += [self.next(state, t) for t in self._copying(state, self.budget).tolist() if t != self.pad_id]
            self._ends[start] = found
        return self._ends[start]

    def copied_piece(self, state, text: str) -> tuple[int, int] | None:
        """(start, end) of the text where the copy made in `state` stands (its earliest
        occurrence), `text` the slot's text as in `span`; None if nothing was copied."""
        end = self.copied_to(state)
        if self.slot.json_kind != "string":
            text = text[1:-1] if text.startswith('"') else ""
        return None if end is None or not text else (end - len(text.encode()), end)

    def copied_to(self, state) -> int | None:
        """Where the earliest occurrence of the piece copied so far ends, one that is a whole piece
        where there is one; None if none was copied."""
        ends = state[2]
        return self.source.piece_ends(ends)[0] if isinstance(ends, tuple) and ends else None

    def span(self, state, text: str) -> tuple[int, int] | None:
        """Where the slot's value stands in the text, in characters (None: not a piece of it).
        `text` is the slot's text: a string's content as JSON writes it (quoted if nullable)."""
        if self.slot.json_kind != "string":
            if not text.startswith('"'):
                return None     # null
            text = text[1:-1]
        ends = state[2] if isinstance(state[2], tuple) else None
        return self.source.span(ends, text.encode())

    def release(self, state):
        """The state with the copy given up: the slot goes on under its automaton alone."""
        return state[0], state[1], FREE

    def next(self, state, token: int):
        key = (state, token)
        if key not in self._next:
            self._next[key] = self._step(state, token)
        return self._next[key]

    def _step(self, state, token: int):
        q, inside, ends = state
        q2 = self.inner.next(q, token)
        if token == self.pad_id or ends == FREE or not (inside or self.pieces.quote_first[token]):
            return q2, inside, ends
        if self.slot.json_kind != "string" and self.inner.is_final(q2):   # the quotes closed: only pads follow
            ends = self.source.after(ends, int(self.pieces.closed[token])) if inside else ()
            return (q2, False, ends) if self.source.may_end(ends) else (q2, True, FREE)   # cut mid-word: left the text
        ends = self.source.after(ends, int((self.pieces.body if inside else self.pieces.opened)[token]))
        return q2, True, ends if ends != () else FREE

    def is_final(self, state) -> bool:
        return self.inner.is_final(state[0])

    def min_tokens(self, state) -> int:
        return self.inner.min_tokens(state[0])

    def accepts(self, token_ids, *, allow_empty: bool = False) -> bool:
        return self.inner.accepts(token_ids, allow_empty=allow_empty)

    def violation(self, value) -> str | None:
        return self.inner.violation(value)


def spans(decoded) -> dict[str, tuple[int, int]]:
    """Per verbatim field of a decoded canvas (decoder.Decoded) that holds a piece of the text:
    (start, end), the piece's place in the text in characters; the occurrence its copy followed."""
    canvas, out = decoded.canvas, {}
    for i, a in enumerate(decoded.automata):
        if isinstance(a, Verbatim) and not canvas.is_empty(decoded.ids, i):
            where = a.span(decoded.states[i], canvas.slot_text(decoded.ids, i))
            if where is not None:
                out[canvas.slots[i].path] = where
    return out


# What ends a sentence or closes an aside: not the end of a web address copied before it
_CLOSING = b".,;:!?')"


def widen(decoded) -> None:
    """Make each patterned copy whole where the model began or ended it inside a piece: a copy
    begun inside a run of ASCII letters and digits, where the pattern accepts a longer piece
    from further back in the run of ASCII characters without a space it stands in (a web
    address: in its run of letters and digits), becomes the longest such piece (2001:db8::ff00:42,
    not its 8::ff00:42; each copy is already the longest on its right, Verbatim._may_stop); a
    web address loses the sentence's punctuation after it (.../42. and (see https://a.org/x)
    end at 42 and x). A copy begun after a separator is as the model began it (10:00 of
    08:00-10:00, not a time at -10:00), but an IPv6 or e-mail address, which holds separators
    (2001:db8::1, not its db8::1; j.doe@example.org, not doe@example.org). Changes
    `decoded.ids` and `states` in place."""
    canvas = decoded.canvas
    for i, a in enumerate(decoded.automata):
        if not isinstance(a, Verbatim) or not a.patterned or i in decoded.known or canvas.is_empty(decoded.ids, i):
            continue
        slot = canvas.slots[i]
        if (piece := a.copied_piece(decoded.states[i], canvas.slot_text(decoded.ids, i))) is None:
            continue
        start, end = piece
        data, first, kind = a.source.data, start, a.address_kind()
        before = data[start - 1] if start else 0
        if _alphanumeric(before) or kind == "joined" and 32 < before < 128:   # begun inside a run: back through it
            while first > 0 and (_alphanumeric(data[first - 1]) or kind != "web" and 32 < data[first - 1] < 128):
                first -= 1
        wider = [(lo, end) for lo in range(first, start) if a.source.begin[lo]]
        if kind == "web" and (cut := _address_end(data, start, end)) < end:
            wider = [(start, cut)]
        for lo, hi in wider:
            content = data[lo:hi].decode()
            toks = canvas.tokenizer.encode(content if slot.json_kind == "string" else f'"{content}"')
            if len(toks) <= slot.budget and a.inner.accepts(toks):
                decoded.ids[slot.start:slot.end] = toks + [canvas.pad_id] * (slot.budget - len(toks))
                decoded.states[i] = a.initial
                for t in toks:
                    decoded.states[i] = a.next(decoded.states[i], t)
                break


def _alphanumeric(byte: int) -> bool:
    return 48 <= byte <= 57 or 65 <= byte <= 90 or 97 <= byte <= 122


def _address_end(data: bytes, start: int, end: int) -> int:
    """Where a web address copied as data[start:end] ends without the punctuation of the
    sentence after it (a closing bracket only where the address opened none)."""
    while end > start and data[end - 1:end] in _CLOSING and \
            (data[end - 1] != ord(")") or data[start:end].count(b"(") < data[start:end].count(b")")):
        end -= 1
    return end


def uncopied(decoded) -> tuple[str, str] | None:
    """(path, value) of the first verbatim field whose value is no piece of the text: a copy that
    left the text, where it held no piece the pattern accepts, and went on under the pattern
    alone; None where every value is a piece or given (`known`)."""
    canvas, found = decoded.canvas, spans(decoded)
    for i, a in enumerate(decoded.automata):
        if not isinstance(a, Verbatim) or i in decoded.known or canvas.slots[i].path in found \
                or canvas.is_empty(decoded.ids, i):
            continue
        if (text := canvas.slot_text(decoded.ids, i)) not in ("", '""', "null"):
            return canvas.slots[i].path, text
    return None


def for_text(automata: list, text: str, tokenizer) -> list:
    """A canvas's automata with each verbatim slot bound to `text`; the list itself if none is."""
    verbatim = [a for a in automata if isinstance(a, SlotAutomaton) and a.slot.verbatim]
    if not verbatim:
        return automata
    source = Source(text, pieces(tokenizer, verbatim[0]._t.vocab_size))
    return [Verbatim(a, source) if a in verbatim else a for a in automata]
