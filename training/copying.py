"""Copy drills: short texts whose record is almost all copied value tokens.

Extraction is mostly copying a span that follows a cue. In the real kinds a record has
a few dozen value tokens among hundreds of pads and fixed tokens, so a small model
sees little copying per step and learns it late; a drill is almost all value tokens.
Values are drawn like the notices' (letter codes, digit runs, coordinates, times,
words). Two drills:
- `copy`: labelled items (`label) value`), labels from the notices' own cues, in random
  order with some labels absent; the record holds each label's value.
- `list`: 3-16 items of one form joined by one separator, as a polygon's vertices or a
  message's tasks are written; the record is the list, in order. The real kinds hold such
  lists (vertices, tasks) and the model did not learn to copy them in order.
"""

from __future__ import annotations

import random
import string
from typing import Optional

from pydantic import BaseModel, ConfigDict, Field, create_model

from . import draw

LABELS = ("A", "B", "C", "D", "E", "F")
CUES = {"A": ["A)", "ITEM A:", "LOC"], "B": ["B)", "FROM", "START"], "C": ["C)", "TO", "END"],
        "D": ["D)", "SKED", "TIME"], "E": ["E)", "TEXT", "NOTE"], "F": ["F)", "LWR", "FLOOR"]}
_WORDS = ["AREA", "RWY", "CLSD", "TWY", "DUE", "WIP", "UAS", "ACT", "drone", "zone", "park", "river", "north",
          "AVBL", "OBST", "LGT", "U/S", "TEMPO", "HEL", "PJE"]


def _value(rng: random.Random) -> str:
    kind = rng.randrange(6)
    if kind == 0:   # a location or FIR code, or any letter code
        return "".join(rng.choices(string.ascii_uppercase, k=rng.randint(2, 6)))
    if kind == 1:   # a digit run: a time, a limit, a number
        return "".join(rng.choices(string.digits, k=rng.randint(1, 10)))
    if kind == 2:   # a coordinate as notices write it
        return f"{rng.randrange(90):02d}{rng.randrange(60):02d}{rng.choice('NS')}" \
               f"{rng.randrange(180):03d}{rng.randrange(60):02d}{rng.choice('EW')}"
    if kind == 3:   # code and number mixed: FL195, 1500FT, A1234/23
        return rng.choice([f"FL{rng.randrange(1000):03d}", f"{rng.randrange(1, 20000)}FT",
                           f"{rng.choice(string.ascii_uppercase)}{rng.randrange(10000):04d}/{rng.randrange(100):02d}"])
    if kind == 4:   # a few words
        return " ".join(rng.choices(_WORDS, k=rng.randint(1, 3)))
    return f"{rng.randrange(24):02d}{rng.randrange(60):02d}-{rng.randrange(24):02d}{rng.randrange(60):02d}"


# The values of the labelled items of a text; null where the label is absent.
Copied = create_model(
    "Copied", __config__=ConfigDict(extra="forbid"),
    **{label.lower(): (Optional[str], Field(None, max_length=24, description=f"value after the {label} cue",
                                            json_schema_extra={"max_tokens": 16})) for label in LABELS},
)


def copy_example(rng: random.Random):
    """(text, gold): one cue style for the whole text, 3-6 present labels in random order."""
    style = rng.randrange(3)
    present = rng.sample(LABELS, rng.randint(3, 6))
    values = {label: _value(rng) for label in present}
    sep = rng.choice([" ", "\n", " / "])
    text = sep.join(f"{CUES[label][style]} {values[label]}" for label in present)
    return text, Copied(**{label.lower(): v for label, v in values.items()})


class Item(BaseModel):
    """One item of a list: a value, or two written together (a vertex's latitude and longitude)."""

    model_config = ConfigDict(extra="forbid")

    first: str = Field(max_length=24, description="the item's first value", json_schema_extra={"max_tokens": 12})
    second: Optional[str] = Field(None, max_length=24, description="its second value, if it has one",
                                  json_schema_extra={"max_tokens": 12})


class Listed(BaseModel):
    """The items of a list, in the order written."""

    model_config = ConfigDict(extra="forbid")

    items: list[Item] = Field(min_length=1, max_length=16, description="the items in order")


def _pair(rng: random.Random, form: int) -> tuple[str, Optional[str]]:
    if form < 2:   # a vertex, in degrees-minutes-seconds or in signed decimal degrees
        lat, lon = draw.world_point(rng)
        if form == 0:
            return draw.dms(lat, "lat"), draw.dms(lon, "lon")
        places = rng.randint(2, 5)
        return draw.decimal(lat, places), draw.decimal(lon, places)
    if form == 2:   # an identifier and a number: UAV-12 350
        return f"{draw.letters(rng, rng.randint(2, 4))}-{rng.randint(1, 999)}", str(rng.randrange(1, 10000))
    return _value(rng), None   # one value


def list_example(rng: random.Random):
    """(text, gold): 3-16 items of one form, joined by one separator, between a lead and a tail."""
    form = rng.randrange(4)
    items = [_pair(rng, form) for _ in range(rng.randint(3, 16))]
    inner = rng.choice([" ", ", "]) if form < 3 else ""
    sep = rng.choice([s for s in (" - ", "\n", ", ", "; ", " / ") if s != inner])   # items tell apart
    body = sep.join(a if b is None else f"{a}{inner}{b}" for a, b in items)
    lead = rng.choice(["", "WI AN AREA BOUNDED BY: ", "POINTS: ", "LIST\n", "Tasks: "])
    tail = rng.choice(["", ".", " (END)", "\nEND"])
    return f"{lead}{body}{tail}", Listed(items=[Item(first=a, second=b) for a, b in items])
