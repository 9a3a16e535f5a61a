"""Training data for clover-mini: batches of the decoder's exact canvases, one kind each.

One example is `api.prompt_ids(tok, text, canvas) + canvas.fill(gold)`: the prompt is
causal history and the canvas is one bidirectional block (config.block_size is at least
the longest canvas), except where a list marked item_blocks makes a block of each item:
then a batch trains one of those blocks, after the clean blocks before it, as the decoder
decodes it. A batch holds examples of one kind, so every row's canvas has the same
layout; prompts are left-padded and `pad` tells the model how much. Per example a
fraction r ~ U(0.05, 1] of the SLOT positions (values and their pads; fixed spans stay
clean) is masked (`noise`), at random or, half the time, as the suffix of each slot (the
state the decoder's left-to-right commits inside a slot produce).

Every batch is a pure function of (seed, step): examples come from
`generate.sample(kind, random.Random(seed))` with seeds from 1_000_000 up (evaluation
uses small seeds), masks from a torch.Generator seeded the same way. The held-out family
is never drawn; ../shared/data is never read.

`CausalData` is the same stream for the autoregressive twin: the kind of each step, the
example seeds and the examples skipped are those of `Data`; a row is the prompt, then the
gold record as compact JSON (what outlines-core's JSON regex admits with whitespace
pattern "", keys in schema order), then eos.
"""

from __future__ import annotations

import json
import random

import torch

from clover_struct.api import prompt_ids
from clover_struct.engine.tokenizer import Tokenizer
from clover_struct.schema_walk import build_canvas
from clover_struct.schemas import DispatchJudgments, DispatchMessage, NoFlyZone, Notam

from .copying import Copied, Listed, copy_example, list_example
from .dispatches import TASK_WEIGHTS, dispatch_example
from .generate import resolve, sample

# "copy": labelled-copy drills (copying.py), dense in value tokens: the warm phase's data
# and a fifth of the diffusion steps (see --warm-steps); "list": lists copied in order;
# "missions": dispatch messages with more missions than the evaluation's; "verdicts":
# judgment conflicts with the geometric answers given; "flags" and "pieces": zone notices
# trained on their uas_only, or their reason and times, alone (ONLY); "reasons": zone
# notices trained on their reason alone, masked whole; "tfr": FAA TFRs
SCHEMAS = {"notam": Notam, "zone": NoFlyZone, "dispatch": DispatchMessage, "judgment": DispatchJudgments,
           "copy": Copied, "list": Listed, "missions": DispatchMessage, "verdicts": DispatchJudgments,
           "flags": NoFlyZone, "pieces": NoFlyZone, "reasons": NoFlyZone, "tfr": NoFlyZone}


def mission_example(rng: random.Random):
    """A dispatch message with three times the share of missions: whose type and priority
    are read from the wording, not copied (mission types stayed at chance through stage 9;
    clover-mini's stages 10 and 11 trained on these)."""
    weights = {**TASK_WEIGHTS, "mission_assigned": 3 * TASK_WEIGHTS["mission_assigned"]}
    return dispatch_example(rng, rng.choice(resolve("dispatch")), weights)


def verdict_example(rng: random.Random):
    """A judgment case with a conflict, trained with its geometric answers given (GIVEN): the
    state `decide(known=route_facts(...))` starts from, which random masks over all eight
    answers almost never leave. Through stage 13 the model answered `proceed` on every such
    case with conflict given true (60 evaluation cases; the rules turned it into `reroute`)."""
    while True:
        text, gold = sample("judgment", rng)[1:]
        if gold.conflict:
            return text, gold


def zone_example(rng: random.Random):
    """A zone notice, for one field alone (ONLY). In a zone row with every decision masked
    the uas_only flag is 5 of ~280 loss weights, too little to move it off its prior; scored
    alone it is learned (training/LOG.md has the measurements). "pieces" rows do the same for
    the copies the full rows taught worst by stage 21: the reason (0.71 of generated zone
    notices right) and the times."""
    return sample("zone", rng)[1:]


def reason_example(rng: random.Random):
    """A zone notice for its reason alone, masked whole (WHOLE), as the decoder reads a free-text
    copy (rows.best_copy scores the piece over all its positions at once); every other one a
    Chinese drone notice, the family whose reasons stage 26 read worst so (24 of 40 generated
    ones wrong, every other family 11 of 360)."""
    return sample("zone", rng, families=["drone_zh"] if rng.random() < 0.5 else None)[1:]


def tfr_example(rng: random.Random):
    """An FAA TFR (FDC line or listing): 6% of the zone rows, and at stage 21 its end time
    was read as its start in half of the generated ones."""
    return sample("zone", rng, families=["zone_faa_tfr"])[1:]


DRILLS = {"copy": copy_example, "list": list_example, "missions": mission_example, "verdicts": verdict_example,
          "flags": zone_example, "pieces": zone_example, "reasons": reason_example, "tfr": tfr_example}
# Fields a kind's rows always show clean, as known values: never masked, never in the loss.
GIVEN = {"verdicts": ("crosses_zone", "vertical_overlap", "time_overlap", "conflict")}   # route_facts' answers
# Fields the loss reads alone for a kind, the rest masked as usual but not scored. A kind in
# WHOLE always has them masked whole (a choice or a free-text copy, decided at once); the
# others as the noise draws them (a patterned copy, decided left to right), whole in rows
# the noise left clean.
ONLY = {"flags": ("uas_only",), "pieces": ("reason", "valid_from_raw", "valid_to_raw"), "reasons": ("reason",)}
WHOLE = {"flags", "reasons"}
# Share of steps per kind (a step is ~batch_tokens tokens whatever the kind). Zones and
# notices are the main use (and three of the five evaluation scores); dispatch canvases
# are long and mostly pads; a judgment row is ~700 prompt tokens for 8 answers, and its
# rules are enforced by the decoder anyway.
DEFAULT_MIX = {"zone": 0.3, "notam": 0.3, "dispatch": 0.12, "judgment": 0.08, "copy": 0.2}
TRAIN_SEED_BASE = 1_000_000   # example seeds start here; evaluation's are far below
MAX_ROWS = 64                 # rows per batch at most (also spaces the example seeds)
MIN_MASK = 0.05


def draw_example(kind: str, rng: random.Random):
    """(text, gold) of one training example of `kind`."""
    return DRILLS[kind](rng) if kind in DRILLS else sample(kind, rng)[1:]


class Data:
    """Batches of one kind each, as a pure function of (seed, step)."""

    def __init__(self, tokenizer: Tokenizer, mix: dict[str, float], batch_tokens: int, seed: int,
                 loss_on: str = "all", block_size: int | None = None, full_mask: float = 0.0,
                 choice_weight: float = 1.0):
        self.tok, self.batch_tokens, self.seed, self.loss_on = tokenizer, batch_tokens, seed, loss_on
        self.full_mask, self.choice_weight = full_mask, choice_weight
        self.kinds, self.weights = list(mix), [mix[k] for k in mix]
        self.canvases = {k: build_canvas(SCHEMAS[k], tokenizer) for k in self.kinds}
        self.spans = {k: [(a, b) for a, b in c.spans(block_size) if any(a < s.end and s.start < b for s in c.slots)]
                      for k, c in self.canvases.items()}   # the blocks that hold slots
        self.given, self.only = ({k: torch.tensor([i for i, s in enumerate(c.slots) if s.path in paths.get(k, ())],
                                                  dtype=torch.long) for k, c in self.canvases.items()}
                                 for paths in (GIVEN, ONLY))
        self.skipped = 0

    def target(self, canvas, gold) -> list[int]:
        """What a row is trained to produce: here the gold canvas (ValueError when a value is
        over its slot's budget, a layout the decoder cannot write)."""
        return canvas.fill(gold)

    def block(self, kind: str, step: int, first=None) -> tuple[int, int] | None:
        """The block of the canvas noised at `step`; None: the canvas is one block. Blocks cut
        by a block size: one at random. Item blocks (a list decoded an item a block): one of
        those the step's first example reaches, at random, so a block is trained about as
        often as decoding steps in it (a zone's first block, which holds every field but the
        later vertices, in about two steps of three; its 32nd vertex almost never)."""
        spans, rng, canvas = self.spans[kind], random.Random(f"block/{self.seed}/{step}"), self.canvases[kind]
        if len(spans) == 1:
            return None
        if len(self.only[kind]):   # a kind scored on some fields alone: the block that holds them
            starts = {canvas.slots[i].start for i in self.only[kind].tolist()}
            return next(b for b in spans if any(b[0] <= a < b[1] for a in starts))
        if len(canvas.blocks) == 1 or first is None:
            return rng.choice(spans)
        return rng.choice([b for b in spans if reached(canvas, first, b[0])])

    def batch(self, step: int):
        """(kind, canvas, block, [(prompt ids, target ids), ...]) for `step`: rows whose decoding
        steps in `block` (`reached`), as long as they are up to its end."""
        kind = random.Random(f"clover-mini/{self.seed}/{step}").choices(self.kinds, self.weights)[0]
        canvas, rows, longest = self.canvases[kind], [], 0
        blocked = len(canvas.blocks) > 1 and len(self.spans[kind]) > 1 and not len(self.only[kind])
        # (item blocks: the block is chosen by the step's first example)
        block = None if blocked else self.block(kind, step)
        base = TRAIN_SEED_BASE + self.seed * 1_000_000_000 + step * MAX_ROWS * 4
        for j in range(MAX_ROWS * 4):
            if len(rows) == MAX_ROWS:
                break
            text, gold = draw_example(kind, random.Random(base + j))
            try:
                target = self.target(canvas, gold)
            except ValueError:
                self.skipped += 1
                continue
            if blocked and block is None:
                block = self.block(kind, step, target)
            if block and not reached(canvas, target, block[0]):
                continue
            prompt = prompt_ids(self.tok, text, canvas)
            longest2 = max(longest, len(prompt) + (block[1] if block else len(target)))
            if rows and (len(rows) + 1) * longest2 > self.batch_tokens:
                break
            rows.append((prompt, target))
            longest = longest2
        return kind, canvas, block, rows


def reached(canvas, ids, start: int) -> bool:
    """Whether decoding the filled canvas `ids` steps in the block at `start`: not when the
    block begins a list item whose previous item is absent (the decoder pads the rest)."""
    for g in canvas.groups:
        if g.kind == "item" and g.start == start and g.prev is not None:
            return canvas.is_present(ids, g.prev)
    return True


def collate(rows, pad_id: int):
    """Left-pad prompts so the canvases align at the end: ids [B, T], pad [B], gold canvas [B, L]."""
    P = max(len(p) for p, _ in rows)
    ids = torch.tensor([[pad_id] * (P - len(p)) + p + g for p, g in rows])
    pad = torch.tensor([P - len(p) for p, _ in rows])
    return ids, pad, torch.tensor([g for _, g in rows])


def slot_index(canvas) -> tuple[torch.Tensor, torch.Tensor]:
    """Per canvas position: its slot (-1 on fixed text) and its offset inside the slot."""
    slot = torch.full((len(canvas),), -1)
    offset = torch.zeros(len(canvas), dtype=torch.long)
    for i, s in enumerate(canvas.slots):
        slot[s.start:s.end] = i
        offset[s.start:s.end] = torch.arange(s.budget)
    return slot, offset


def noise(slot, offset, B: int, generator: torch.Generator, full: float = 0.0) -> torch.Tensor:
    """Which canvas positions to mask: [B, L] bool, only slot positions, at least one per row.

    r ~ U(0.05, 1] per row. Random rows mask each slot position with probability r;
    suffix rows keep a Binomial(budget, 1 - r) prefix of each slot and mask the rest,
    which is what the decoder sees (it commits left to right inside a slot). A share
    `full` of the rows is masked whole: the state of the decoder's first step, where it
    settles every choice slot (union tags, enums) from the text alone."""
    is_slot = slot >= 0
    r = 1 - (1 - MIN_MASK) * torch.rand(B, 1, generator=generator)
    u = torch.rand(B, len(slot), generator=generator)
    random_rows = u < r
    kept = torch.zeros(B, int(slot.max()) + 1).index_add_(1, slot[is_slot], (u >= r)[:, is_slot].float())
    suffix_rows = offset[None] >= kept[:, slot.clamp(min=0)]
    suffix = torch.rand(B, 1, generator=generator) < 0.5
    masked = torch.where(suffix, suffix_rows, random_rows) & is_slot
    none = ~masked.any(1)
    if none.any():   # mask one slot position of such rows
        pick = torch.rand(int(none.sum()), len(slot), generator=generator).masked_fill(~is_slot, -1).argmax(1)
        masked[none.nonzero()[:, 0], pick] = True
    if full:   # drawn last: without it the masks are those of runs before it existed
        masked |= (torch.rand(B, 1, generator=generator) < full) & is_slot
    return masked


def decisions(canvas, gold: torch.Tensor, slot: torch.Tensor, offset: torch.Tensor) -> torch.Tensor:
    """[B, L] bool: the slot positions the decoder asks the model about: the value tokens,
    the pad that ends each value (or leaves the slot empty), and every position of a choice
    slot (its candidates are scored over the whole span). The other pads it writes without
    asking. They are 53% of the slot positions of a Notam canvas and 81% of a
    DispatchMessage one (eight items of five variants, mostly absent; its values are 8%),
    so in a plain mean over all of them a dispatch step weighs its values ~5x less than a
    notice step does (--loss-on decisions). slot, offset: slot_index(canvas)."""
    whole = choice_positions(canvas, slot)
    pad = gold == canvas.pad_id
    after_pad = torch.zeros_like(pad)
    after_pad[:, 1:] = pad[:, :-1]
    return (slot >= 0) & (~pad | (offset == 0) | ~after_pad | whole)


def choice_positions(canvas, slot: torch.Tensor) -> torch.Tensor:
    """[L] bool: the positions of choice slots (enums, booleans, union tags). slot: slot_index's."""
    return torch.tensor([s.kind == "choice" for s in canvas.slots])[slot.clamp(min=0)] & (slot >= 0)


def record_json(gold) -> str:
    """The record as the twin writes it: compact JSON, every field, keys in schema order."""
    return json.dumps(gold.model_dump(mode="json", by_alias=True), separators=(",", ":"), ensure_ascii=False)


class CausalData(Data):
    """Batches of (prompt ids, JSON + eos ids) rows, one kind each, as a pure function of (seed, step)."""

    def target(self, canvas, gold) -> list[int]:
        canvas.fill(gold)   # the diffusion model never sees a record its canvas cannot write
        return self.tok.encode(record_json(gold)) + [self.tok.eos_id]

    def block(self, kind: str, step: int, first=None) -> None:
        return None   # the whole record, every step


# A model call's fixed cost, in padded tokens. 16 stage-2 twin batches on 2 CPU cores took
# 2.2-2.4 s a step in one padded call, 1.6-1.9 s in length groups (1,000 to 3,000 alike).
CALL_TOKENS = 2000


def length_groups(rows, call_tokens: int = CALL_TOKENS) -> list[list]:
    """The (prompt, target) rows in groups of similar length, the cheapest to run each padded
    to its longest row: padded tokens plus `call_tokens` a group. One long row among short ones
    otherwise pads them all to its length (stage-2 twin batches: 44% of the positions)."""
    rows = sorted(rows, key=lambda r: len(r[0]) + len(r[1]))
    lengths = [len(p) + len(t) for p, t in rows]
    cost, start = [0], [0]   # the cheapest cut of the first `end` rows, and where its last group starts
    for end in range(1, len(rows) + 1):
        best = min(range(end), key=lambda s: cost[s] + (end - s) * lengths[end - 1])
        cost.append(cost[best] + (end - best) * lengths[end - 1] + call_tokens)
        start.append(best)
    groups, end = [], len(rows)
    while end:
        groups.append(rows[start[end]:end])
        end = start[end]
    return groups[::-1]


def collate_causal(rows, pad_id: int):
    """Right-padded rows: ids [B, T] and the loss mask [B, T], True on the JSON and eos tokens."""
    T = max(len(p) + len(t) for p, t in rows)
    ids = torch.full((len(rows), T), pad_id)
    target = torch.zeros(len(rows), T, dtype=torch.bool)
    for b, (p, t) in enumerate(rows):
        ids[b, :len(p) + len(t)] = torch.tensor(p + t)
        target[b, len(p):len(p) + len(t)] = True
    return ids, target
