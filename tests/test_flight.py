"""judge_flight: what geometry settles is known, the model reads only the notices it cannot rule out."""

import pytest

from clover_struct.airspace import flight
from clover_struct.errors import ExtractionError
from clover_struct.schemas import DispatchJudgments, judgment_rules_hold
from clover_struct.schemas.dispatch import Action
from test_dispatch_demo import demo, model_dir, zone  # noqa: F401 (a fixture)

HIT, MISS = ("31.2150", "121.4700"), ("31.3000", "121.6000")   # on the demo route, and 10 km off it


@pytest.fixture
def asked(monkeypatch):
    """The decide call judge_flight makes, recorded instead of run."""
    calls = []
    monkeypatch.setattr(flight, "decide", lambda text, schema, **kw: calls.append(dict(text=text, **kw)))
    return calls


def judge(notices, zones):
    flight.judge_flight(demo.request(), notices, zones, demo.ROUTE, demo.ALTITUDE_M, *demo.WINDOW)


def rule_verdicts(rules, **answers):
    record = dict(crosses_zone=True, vertical_overlap=True, time_overlap=True, conflict=True,
                  authorisation_needed=False, route_must_change=True, can_start_now=False, **answers)
    return [r.holds(DispatchJudgments(**record) if r.on_instance else record) for r in rules]


def test_only_the_zones_in_conflict_are_shown_and_every_fact_is_known(asked):
    judge(["NOTICE ONE", "NOTICE TWO"], [zone(*MISS, 120), zone(*HIT, 120, end="2705121800")])
    call, = asked
    assert "NOTICE TWO" in call["text"] and "NOTICE ONE" not in call["text"] and "[1] NOTICE TWO" in call["text"]
    assert call["known"] == {"crosses_zone": True, "vertical_overlap": True, "time_overlap": True, "conflict": True}
    # the conflicting zone ends the same day: a route that must change is delayed, not rerouted
    assert rule_verdicts(call["rules"], action="delay") == [True, True]
    assert rule_verdicts(call["rules"], action="reroute") == [True, False]


def test_a_zone_in_force_for_days_means_reroute(asked):
    judge(["NOTICE"], [zone(*HIT, 120, end="2705201800")])
    assert rule_verdicts(asked[0]["rules"], action="delay") == [True, False]


def test_without_a_conflict_every_notice_is_shown_and_no_action_rule_is_added(asked):
    judge(["NOTICE ONE", "NOTICE TWO"], [zone(*MISS, 120), zone(*HIT, 60)])
    call, = asked
    assert "NOTICE ONE" in call["text"] and "NOTICE TWO" in call["text"]
    assert call["known"]["conflict"] is False and len(call["rules"]) == 1


def test_an_unread_notice_is_shown_and_only_what_the_read_zones_prove_is_known(asked):
    judge(["NOTICE ONE", "NOTICE TWO"], [zone(*HIT, 60), ExtractionError("area", "no value")])
    call, = asked
    assert "NOTICE ONE" not in call["text"] and "[1] NOTICE TWO" in call["text"]
    assert call["known"] == {"crosses_zone": True, "time_overlap": True}   # the unread zone may add the rest
    assert len(call["rules"]) == 1


def test_the_answers_keep_the_facts_and_the_rules(model_dir):
    from clover_struct import load_model

    answers = flight.judge_flight(demo.request(), [demo.NOTICE], [zone(*HIT, 120)], demo.ROUTE, demo.ALTITUDE_M,
                                  *demo.WINDOW, model=load_model(model_dir))
    assert judgment_rules_hold(answers) and answers.conflict and answers.action != Action.PROCEED


def test_a_notice_read_as_no_zone_restricts_nothing(asked):
    from clover_struct.schemas.airspace import NoFlyZone

    judge(["RWY 09/27 CLSD", "NOTICE TWO"], [NoFlyZone(uas_only=False), zone(*HIT, 120, end="2705121800")])
    call, = asked
    assert "RWY 09/27 CLSD" not in call["text"] and "[1] NOTICE TWO" in call["text"]
    assert call["known"] == {"crosses_zone": True, "vertical_overlap": True, "time_overlap": True, "conflict": True}
