"""A flight request judged against notices: geometry by code, the rest by the model.

The judgment prompt (`QUESTIONS`, `judgment_text`: what the model reads, and was trained
on) and the delay policy (`ends_soon`) live here too.

`judge_flight` takes the notices' zones as extracted (or the ExtractionError of a notice
that could not be read) and leaves to the model only what the text alone says:

- what shapely answers (`route_facts`, `facts_of`) goes in as known facts; with a notice unread, only
  the facts the read zones prove (True) are known, and the model decides the others; a notice
  read as defining no zone (`defines_zone` False) restricts nothing;
- the model reads the notices geometry cannot rule out, the zones the flight conflicts with
  and the notices not read, for whether they grant permission: with every notice listed it
  cannot tell which one's permission counts (clover-mini, 200 evaluation cases with the true
  zones' facts: all 10 single-notice conflicts right, 16 of 62 wrong beside other notices);
- when every zone in conflict ends within a day of the start (`ends_soon`), a route that must
  change is delayed, and when none does it is rerouted: a rule, so the model's choice
  between permission and none decides the action.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Optional

from clover_struct.errors import ExtractionError, UsageError
from clover_struct.linked import decide, implies, predicate
from clover_struct.schemas.airspace import NoFlyZone
from clover_struct.schemas.dispatch import DispatchJudgments, judgment_rules_hold

from .geometry import facts_of, passages

DELAY_HORIZON = timedelta(hours=24)   # "delay": the blocking zones end within this of the planned start


def ends_soon(valid_to: Optional[datetime], start: datetime) -> bool:
    """Does a restriction ending at valid_to (None: never) end within DELAY_HORIZON of start?"""
    return valid_to is not None and valid_to <= start + DELAY_HORIZON


# The questions a judgment prompt asks, in DispatchJudgments' field order.
QUESTIONS = (
    "Does the route enter any notified zone?",
    "Is the planned height within the vertical limits of a zone the route enters?",
    "Is a zone the route enters in force at any time during the flight window?",
    "Would the flight be inside one zone, within its limits, while that zone is in force?",
    "Is every such conflict with a zone that grants permission on request?",
    "Is there a conflict with a zone that grants no permission (so the route must change)?",
    "May the flight go as requested?",
    "Recommended action: proceed, request_authorisation, delay (the blocking zones end within 24 hours of "
    "the planned start) or reroute?",
)


def judgment_text(request: str, notices: list[str]) -> str:
    """The prompt DispatchJudgments are decided from: a flight request, its notices numbered, the questions."""
    listed = "\n\n".join(f"[{i + 1}] {t}" for i, t in enumerate(notices))
    questions = "\n".join(f"{i + 1}. {q}" for i, q in enumerate(QUESTIONS))
    return f"{request}\n\nNOTICES\n{listed}\n\nQUESTIONS\n{questions}"


def judge_flight(request: str, notices: list[str], zones: list[NoFlyZone | ExtractionError],
                 route: list[tuple[float, float]], height_m: float, start: datetime, end: datetime,
                 *, model=None, joint: bool = True, trace: bool = False, truncate: bool = False):
    """DispatchJudgments for a flight of (lat, lon) points at height_m AGL over [start, end]
    (joint=False: each open question answered on its own, the baseline; see decide)."""
    if not (isinstance(notices, (list, tuple)) and isinstance(zones, (list, tuple))):
        raise UsageError(f"notices and zones are lists (one zone or ExtractionError per notice), not "
                         f"{type(notices).__name__} and {type(zones).__name__}")
    if len(notices) != len(zones):
        raise UsageError(f"{len(notices)} notices and {len(zones)} zones: give each notice's zone (or its "
                         f"ExtractionError) in the notices' order")
    read = [z for z in zones if not isinstance(z, ExtractionError)]
    seen = passages(route, height_m, start, end, read)
    facts = facts_of(seen)
    in_conflict = {id(z): all(p) for z, p in zip(read, seen)}
    relevant = [in_conflict.get(id(z), True) for z in zones]   # a notice not read cannot be ruled out
    rules = [predicate(judgment_rules_hold)]
    if len(read) < len(zones):
        facts = {k: v for k, v in facts.items() if v}
    else:
        soon = {ends_soon(z.valid_to, start) for z, r in zip(zones, relevant) if r}
        if len(soon) == 1:
            rules.append(implies("route_must_change", "action=delay" if soon.pop() else "action=reroute"))
    shown = [t for t, r in zip(notices, relevant) if r] or notices
    return decide(judgment_text(request, shown), DispatchJudgments, model=model, known=facts, rules=rules,
                  joint=joint, trace=trace, truncate=truncate)
