"""DispatchMessage (a discriminated union of tasks) and the judgment rules."""

import itertools

import pytest
from pydantic import ValidationError

from clover_struct.schemas.dispatch import (
    Action, AltitudeChanged, DispatchJudgments, DispatchMessage, FlightHold, judgment_rules_hold,
)

TASKS = [
    {"kind": "zone_lifted", "zone_id": "R-204", "effective_utc": "15:00:00"},
    {"kind": "waypoint_changed", "drone_id": "UAV-17", "waypoint": 3, "lat": 47.3712, "lon": 8.5417},
    {"kind": "mission_assigned", "drone_id": "UAV-17", "mission_type": "medical", "priority": "urgent",
     "destination": "Kelvor Clinic"},
    {"kind": "altitude_changed", "drone_id": "DR042", "value": 400, "unit": "FT"},
    {"kind": "flight_hold", "drone_id": "DR042", "until_utc": None, "reason": "high winds"},
]


def test_tasks_parse_by_kind():
    m = DispatchMessage.model_validate({"sender": "OPS-NORTH", "issued_utc": "14:32:00", "tasks": TASKS})
    names = [type(t).__name__ for t in m.tasks]
    assert names == ["ZoneLifted", "WaypointChanged", "MissionAssigned", "AltitudeChanged", "FlightHold"]
    assert isinstance(m.tasks[3], AltitudeChanged) and m.tasks[3].altitude_m == pytest.approx(121.92)
    assert isinstance(m.tasks[4], FlightHold)
    assert DispatchMessage.model_validate(m.model_dump(mode="json")) == m


@pytest.mark.parametrize(
    "tasks",
    [[], TASKS * 2, [{"kind": "teleport", "drone_id": "UAV-17"}], [{**TASKS[1], "lat": 91.0}],
     [{**TASKS[2], "mission_type": "pizza"}], [{**TASKS[1], "drone_id": "uav 17"}]],
)
def test_bad_messages_are_rejected(tasks):
    with pytest.raises(ValidationError):
        DispatchMessage(tasks=tasks)


def judgments(cross, vert, when, conflict, auth, change, start, action):
    return DispatchJudgments(crosses_zone=cross, vertical_overlap=vert, time_overlap=when, conflict=conflict,
                             authorisation_needed=auth, route_must_change=change, can_start_now=start, action=action)


def test_rules_accept_consistent_answers():
    assert judgment_rules_hold(judgments(False, False, False, False, False, False, True, Action.PROCEED))
    assert judgment_rules_hold(judgments(True, True, False, False, False, False, True, "proceed"))
    assert judgment_rules_hold(judgments(True, True, True, True, True, False, False, "request_authorisation"))
    assert judgment_rules_hold(judgments(True, True, True, True, False, True, False, "delay"))


@pytest.mark.parametrize(
    "answers",
    [
        (False, True, False, False, False, False, True, "proceed"),  # altitude overlap without crossing
        (True, True, True, True, False, False, False, "reroute"),  # conflict with no consequence
        (True, True, True, True, True, True, False, "reroute"),  # both authorisation and reroute
        (True, True, True, False, False, False, False, "proceed"),  # no conflict yet cannot start
        (True, True, True, True, True, False, False, "reroute"),  # action disagrees
    ],
)
def test_rules_reject_inconsistent_answers(answers):
    assert not judgment_rules_hold(judgments(*answers))


def test_every_action_has_a_consistent_assignment():
    seen = {act for bools in itertools.product([False, True], repeat=7) for act in Action
            if judgment_rules_hold(judgments(*bools, act))}
    assert seen == set(Action)
