"""Families of text formats/phrasings, which kinds of example each serves, and the one held out.

A family is a way of writing a notice or message (a layout or a register). Training
draws from every family but HELDOUT_FAMILY; evaluation asks for it by name to measure
generalisation to a format the model never saw. Knows nothing of how texts are rendered.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from typing import Optional

NOTAM_LAYOUTS = ("notam_icao", "notam_multiline", "notam_faa", "notam_aftn")
DRONE_STYLES = ("drone_en_prose", "drone_en_fields", "drone_zh")
# Zone notices in the shapes of the real dev sets: rocket-range polygons, UK bulletin
# circles, FAA TFRs; and the "no zone" answers: notices that restrict no volume, and garbage.
REAL_SHAPES = ("zone_range", "zone_uk", "zone_faa_tfr")
NO_ZONE = ("zone_none", "zone_garbage")
# The zone families that render a drawn ZoneSpec (the judgment cases' notices are these).
SPEC_FAMILIES = NOTAM_LAYOUTS + DRONE_STYLES + ("zone_uk", "zone_faa_tfr")
JUDGMENT_NOTICES = NOTAM_LAYOUTS + DRONE_STYLES

KIND_FAMILIES: dict[str, tuple[str, ...]] = {
    "notam": NOTAM_LAYOUTS,
    "zone": NOTAM_LAYOUTS + DRONE_STYLES + REAL_SHAPES + NO_ZONE,
    "dispatch": ("dispatch_radio", "dispatch_list"),
    "judgment": ("judgment_en",),
}
FAMILIES: tuple[str, ...] = tuple(dict.fromkeys(f for fs in KIND_FAMILIES.values() for f in fs))

# Relative weights of the zone families (1 where not named): the real zone notices are mostly
# range polygons, and "no zone" must be answered often enough to be learned.
ZONE_WEIGHTS = {"zone_range": 4.0, "zone_uk": 2.0, "drone_zh": 1.5, "zone_none": 2.5}

# AFTN framing: the notice in parentheses, often behind a priority/address line and a
# filing-time line. None of the real evaluation notices uses it, so holding it out costs
# nothing there while testing whether copying survives an unseen frame.
HELDOUT_FAMILY = "notam_aftn"


def resolve(kind: str, families: Optional[Iterable[str]] = None) -> tuple[str, ...]:
    """The families of `kind` to draw from: the given ones that serve it, or by default all
    but HELDOUT_FAMILY. Raises ValueError for unknown names or an empty selection."""
    if kind not in KIND_FAMILIES:
        raise ValueError(f"unknown kind {kind!r}; use one of {sorted(KIND_FAMILIES)}")
    own = KIND_FAMILIES[kind]
    if families is None:
        return tuple(f for f in own if f != HELDOUT_FAMILY)
    families = tuple(families)
    unknown = [f for f in families if f not in FAMILIES]
    if unknown:
        raise ValueError(f"unknown families {unknown}; known: {list(FAMILIES)}")
    chosen = tuple(f for f in own if f in families)
    if not chosen:
        raise ValueError(f"none of {list(families)} serves kind {kind!r}; its families are {list(own)}")
    return chosen


def choose(rng: random.Random, kind: str, families: Optional[Iterable[str]] = None) -> str:
    """One family of `kind`: uniform, except zone families by ZONE_WEIGHTS."""
    chosen = resolve(kind, families)
    if kind != "zone":
        return rng.choice(chosen)
    return rng.choices(chosen, weights=[ZONE_WEIGHTS.get(f, 1.0) for f in chosen])[0]
