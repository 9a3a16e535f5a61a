"""Entry point for synthetic data: one function per kind of example, a batch helper, a CLI.

    notam_example(rng, families=None)    -> (text, Notam)
    zone_example(rng, families=None)     -> (text, NoFlyZone)        ICAO item E, ranges, TFRs, plain
                                                                     EN/ZH, and notices with no zone
    zone_case(rng, family)               -> (text, NoFlyZone, Meant) one family, with its meaning
    dispatch_example(rng, families=None) -> (text, DispatchMessage)
    judgment_example(rng, families=None) -> (text, DispatchJudgments)
    examples(kind, n, seed, families=None) -> [(text, gold), ...]
    judgment_cases(n, seed, families=None) -> the judgment examples with their parts

`rng` is a ``random.Random`` (or an int seed). `families` selects formats (see FAMILIES);
by default every family of the kind except HELDOUT_FAMILY, which evaluation asks for by
name. CLI: ``python -m training.generate --kind notam --n 5 --seed 1`` prints JSONL
``{"text", "gold", "family"}``. Knows nothing of models, tokenizers or canvases.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections.abc import Iterable
from typing import Optional, Union

from pydantic import BaseModel

from clover_struct.schemas.airspace import NoFlyZone
from clover_struct.schemas.dispatch import DispatchJudgments, DispatchMessage
from clover_struct.schemas.notam import Notam

from . import draw, drone, negatives, notams, ranges, tfr, zone_notams
from .dispatches import dispatch_example as _dispatch
from .families import FAMILIES, HELDOUT_FAMILY, JUDGMENT_NOTICES, KIND_FAMILIES, NOTAM_LAYOUTS, choose, resolve
from .judgments import JudgmentCase, judgment_case
from .notation import Meant, lowercased

# Families whose notices also come lowercased (real feeds carry such copies), and how often.
LOWERCASE = NOTAM_LAYOUTS + ("zone_range", "zone_uk", "zone_faa_tfr", "zone_none")
LOWERCASE_SHARE = 0.1

__all__ = [
    "FAMILIES", "HELDOUT_FAMILY", "KINDS", "dispatch_example", "examples", "judgment_cases", "judgment_example",
    "notam_example", "sample", "zone_case", "zone_example",
]

KINDS = tuple(KIND_FAMILIES)
Families = Optional[Iterable[str]]
RngLike = Union[random.Random, int]


def _rng(rng: RngLike) -> random.Random:
    if isinstance(rng, random.Random):
        return rng
    if isinstance(rng, int) and not isinstance(rng, bool):
        return random.Random(rng)
    raise TypeError(f"rng must be a random.Random or an int seed, got {type(rng).__name__}")


def sample(kind: str, rng: RngLike, families: Families = None) -> tuple[str, str, BaseModel]:
    """(family, text, gold) for one example of `kind`."""
    rng = _rng(rng)
    families = None if families is None else tuple(families)
    family = choose(rng, kind, families)
    if kind == "notam":
        text, gold = notams.notam_example(rng, family)
    elif kind == "zone":
        text, gold, _ = zone_case(rng, family)
    elif kind == "dispatch":
        text, gold = _dispatch(rng, family)
    else:
        case = _judgment_case(rng, families)
        text, gold = case.text, case.gold
    return family, text, gold


def zone_case(rng: RngLike, family: str) -> tuple[str, NoFlyZone, Meant]:
    """(text, gold, meaning) of one zone notice of `family`: the meaning is what the written
    pieces say in numbers (degrees, metres, UTC), worked out by the generator."""
    rng = _rng(rng)
    if family == "zone_range":
        text, gold, meant = ranges.range_notice(rng)
    elif family == "zone_none":
        text, gold, meant = negatives.none_notice(rng)
    elif family == "zone_garbage":
        return negatives.garbage(rng)
    else:
        spec = draw.zone_spec(rng)
        if family in NOTAM_LAYOUTS:
            text, gold, meant = zone_notams.zone_notice(rng, family, spec)
        elif family == "zone_uk":
            text, gold, meant = zone_notams.uk_circle(rng, spec)
        elif family == "zone_faa_tfr":
            text, gold, meant = tfr.tfr_notice(rng, spec)
        elif family == "drone_zh":
            text, gold, meant = drone.zh_notice(rng, spec)
        elif family in ("drone_en_prose", "drone_en_fields"):
            text, gold, meant = drone.en_notice(rng, spec, family)
        else:
            raise ValueError(f"{family!r} is no zone family; zone families are {list(KIND_FAMILIES['zone'])}")
    if family in LOWERCASE and rng.random() < LOWERCASE_SHARE:
        text, gold, meant = lowercased(text, gold, meant)
    return text, gold, meant


def _judgment_case(rng: random.Random, families: Optional[tuple[str, ...]]) -> JudgmentCase:
    # The notices inside follow the zone families asked for (those that render a drawn
    # zone), else the default ones.
    asked = tuple(f for f in families or () if f in JUDGMENT_NOTICES)
    return judgment_case(rng, asked or tuple(f for f in resolve("zone") if f in JUDGMENT_NOTICES))


def notam_example(rng: RngLike, families: Families = None) -> tuple[str, Notam]:
    return sample("notam", rng, families)[1:]


def zone_example(rng: RngLike, families: Families = None) -> tuple[str, NoFlyZone]:
    return sample("zone", rng, families)[1:]


def dispatch_example(rng: RngLike, families: Families = None) -> tuple[str, DispatchMessage]:
    return sample("dispatch", rng, families)[1:]


def judgment_example(rng: RngLike, families: Families = None) -> tuple[str, DispatchJudgments]:
    return sample("judgment", rng, families)[1:]


def examples(kind: str, n: int, seed: int, families: Families = None) -> list[tuple[str, BaseModel]]:
    rng = random.Random(seed)
    return [sample(kind, rng, families)[1:] for _ in range(n)]


def judgment_cases(n: int, seed: int, families: Families = None) -> list[JudgmentCase]:
    """The cases of examples("judgment", n, seed, families) (the same draws), each with its
    flight request as data and its notices one by one."""
    rng = random.Random(seed)
    families = None if families is None else tuple(families)
    cases = []
    for _ in range(n):
        choose(rng, "judgment", families)   # the family draw of sample()
        cases.append(_judgment_case(rng, families))
    return cases


def main(argv: Optional[list[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="python -m training.generate", description="Print (text, gold) pairs as JSONL.")
    p.add_argument("--kind", choices=KINDS, required=True)
    p.add_argument("--n", type=int, default=10)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--families", default=None,
                   help=f"comma-separated (default: all of the kind but {HELDOUT_FAMILY}); known: {','.join(FAMILIES)}")
    args = p.parse_args(argv)
    families = None if args.families is None else [f.strip() for f in args.families.split(",") if f.strip()]
    rng = random.Random(args.seed)
    try:
        for _ in range(args.n):
            family, text, gold = sample(args.kind, rng, families)
            row = {"text": text, "gold": gold.model_dump(mode="json"), "family": family}
            sys.stdout.write(json.dumps(row, ensure_ascii=False) + "\n")
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
