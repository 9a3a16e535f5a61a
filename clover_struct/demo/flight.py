"""A flight request judged against notices: geometry by code, the rest by the model.

`judge_flight` takes the notices' zones as extracted (or the ExtractionError of a notice
that could not be read) and leaves to the model only what the text alone says:

- what shapely answers (`route_facts`, `facts_of`) goes in as known facts; with a notice unread, only
  the facts the read zones prove (True) are known, and the model decides the others;
- the model reads the notices geometry cannot rule out, the zones the flight conflicts with
  and the notices not read, for whether they grant permission: with every notice listed it
  cannot tell which one's permission counts (clover-mini, 200 evaluation cases with the true
  zones' facts: all 10 single-notice conflicts right, 16 of 62 wrong beside other notices);
- when every zone in conflict ends within a day of the start (`ends_soon`), a route that must
  change is delayed, and when none does it is rerouted: a rule, so the model's choice
  between permission and none decides the action.
"""

from __future__ import annotations

from datetime import datetime

from clover_struct.errors import ExtractionError
from clover_struct.linked import decide, implies, predicate
from clover_struct.schemas.airspace import NoFlyZone
from clover_struct.schemas.dispatch import DispatchJudgments, ends_soon, judgment_rules_hold, judgment_text

from .zones import facts_of, passages


def judge_flight(request: str, notices: list[str], zones: list[NoFlyZone | ExtractionError],
                 route: list[tuple[float, float]], height_m: float, start: datetime, end: datetime,
                 *, model=None, joint: bool = True, trace: bool = False):
    """DispatchJudgments for a flight of (lat, lon) points at height_m AGL over [start, end]
    (joint=False: each open question answered on its own, the baseline; see decide)."""
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
                  joint=joint, trace=trace)
