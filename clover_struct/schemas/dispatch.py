"""Drone dispatch messages (typed tasks) and linked yes/no judgments on a flight request.

``DispatchMessage`` holds up to eight tasks, each a model with a ``kind`` discriminator;
values are copied as written (drone ids, coordinates, times) and units converted by
properties. ``DispatchJudgments`` is a set of linked answers about one flight request
against one or more notices; the rules that tie its answers together are listed below
and checked by ``judgment_rules_hold``. Knows nothing of models, decoding or how the
answers are computed from geometry.
"""

from __future__ import annotations

from datetime import time
from enum import Enum
from typing import Annotated, Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field

from .units import VERBATIM, to_metres

DRONE_ID = r"^[A-Z][A-Z0-9]{0,5}(-[A-Z0-9]{1,6})?$"  # UAV-17, DR042, MEDIC-7A
ZONE_ID = r"^[A-Z0-9][A-Z0-9/-]{1,15}$"  # R-204, H1234/24, TRA12

MissionType = Literal["survey", "medical", "delivery", "inspection", "search_rescue", "mapping"]


class _Task(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ZoneLifted(_Task):
    """A restriction no longer applies."""

    kind: Literal["zone_lifted"] = Field("zone_lifted", description="discriminator")
    zone_id: str = Field(pattern=ZONE_ID, json_schema_extra=VERBATIM,
                         description="identifier of the zone or NOTAM lifted, e.g. R-204")
    effective_utc: Optional[time] = Field(None, description="time (UTC) from which it is lifted; null if at once")


class WaypointChanged(_Task):
    """One waypoint of a drone's route moved."""

    kind: Literal["waypoint_changed"] = Field("waypoint_changed", description="discriminator")
    drone_id: str = Field(pattern=DRONE_ID, json_schema_extra=VERBATIM,
                          description="drone identifier as written, e.g. UAV-17")
    waypoint: int = Field(ge=1, le=99, description="number of the waypoint changed, e.g. 3 for WP3")
    lat: float = Field(ge=-90, le=90, description="new latitude, decimal degrees as written")
    lon: float = Field(ge=-180, le=180, description="new longitude, decimal degrees as written")


class MissionAssigned(_Task):
    """A drone gets a mission. Fields in the order messages state them (priority last), which
    is the order the canvas lays them out in."""

    kind: Literal["mission_assigned"] = Field("mission_assigned", description="discriminator")
    drone_id: str = Field(pattern=DRONE_ID, json_schema_extra=VERBATIM, description="drone identifier as written")
    mission_type: MissionType = Field(description="what the mission is")
    destination: str = Field(
        max_length=40, description="destination or site name as written",
        json_schema_extra={"max_tokens": 40, **VERBATIM},
    )
    priority: Literal["routine", "priority", "urgent"] = Field("routine", description="stated priority; routine if none")


class AltitudeChanged(_Task):
    """A drone's cruise altitude changed."""

    kind: Literal["altitude_changed"] = Field("altitude_changed", description="discriminator")
    drone_id: str = Field(pattern=DRONE_ID, json_schema_extra=VERBATIM, description="drone identifier as written")
    value: float = Field(gt=0, le=10000, description="new altitude number as written")
    unit: Literal["M", "FT"] = Field(description="unit of the new altitude")

    @property
    def altitude_m(self) -> float:
        return to_metres(self.value, self.unit)


class FlightHold(_Task):
    """A drone must hold (stay on the ground or loiter)."""

    kind: Literal["flight_hold"] = Field("flight_hold", description="discriminator")
    drone_id: str = Field(pattern=DRONE_ID, json_schema_extra=VERBATIM, description="drone identifier as written")
    until_utc: Optional[time] = Field(None, description="hold until this time (UTC); null if until further notice")
    reason: Optional[str] = Field(
        None, max_length=60, description="stated reason, briefly", json_schema_extra={"max_tokens": 28, **VERBATIM},
    )


Task = Annotated[
    Union[ZoneLifted, WaypointChanged, MissionAssigned, AltitudeChanged, FlightHold], Field(discriminator="kind")
]


class DispatchMessage(BaseModel):
    """One dispatch message: who sent it, when, and its tasks in order."""

    model_config = ConfigDict(extra="forbid")

    sender: Optional[str] = Field(None, max_length=32, json_schema_extra=VERBATIM,
                                  description="sending desk or callsign as written, e.g. OPS-NORTH")
    issued_utc: Optional[time] = Field(None, description="time the message was issued (UTC)")
    tasks: list[Task] = Field(min_length=1, max_length=8, description="the tasks in the order given")


# --- linked judgments ------------------------------------------------------------------------
#
# Rules that hold between the answers (a later component states them to the decoder):
#   R1  vertical_overlap      -> crosses_zone
#   R2  time_overlap          -> crosses_zone
#   R3  conflict              -> vertical_overlap and time_overlap
#   R4  conflict              <-> (authorisation_needed or route_must_change)
#   R5  not (authorisation_needed and route_must_change)
#   R6  can_start_now         <-> not conflict
#   R7  action == PROCEED     <-> can_start_now
#   R8  action == REQUEST_AUTHORISATION <-> authorisation_needed
#   R9  action in {DELAY, REROUTE}      <-> route_must_change
# (R3 is one-way: the altitude and the time overlap may come from two different zones.)


class Action(str, Enum):
    PROCEED = "proceed"
    REQUEST_AUTHORISATION = "request_authorisation"
    DELAY = "delay"
    REROUTE = "reroute"


class DispatchJudgments(BaseModel):
    """Answers about one flight request (route, altitude, time window) against notices."""

    model_config = ConfigDict(extra="forbid")

    crosses_zone: bool = Field(description="does the route's ground track enter any notified zone?")
    vertical_overlap: bool = Field(description="is the planned altitude within the limits of a zone the route enters?")
    time_overlap: bool = Field(description="is a zone the route enters in force during the flight window?")
    conflict: bool = Field(description="would the flight enter one zone inside its limits while it is in force?")
    authorisation_needed: bool = Field(description="is every conflict with a zone that grants permission on request?")
    route_must_change: bool = Field(description="is there a conflict with a zone that grants no permission?")
    can_start_now: bool = Field(description="may the flight go as requested?")
    action: Action = Field(description="proceed, request_authorisation, delay (zone ends within a day) or reroute")


def judgment_rules_hold(j: DispatchJudgments) -> bool:
    """True when the answers satisfy rules R1-R9 above."""
    implies = lambda a, b: (not a) or b  # noqa: E731
    return all(
        (
            implies(j.vertical_overlap, j.crosses_zone),
            implies(j.time_overlap, j.crosses_zone),
            implies(j.conflict, j.vertical_overlap and j.time_overlap),
            j.conflict == (j.authorisation_needed or j.route_must_change),
            not (j.authorisation_needed and j.route_must_change),
            j.can_start_now == (not j.conflict),
            (j.action == Action.PROCEED) == j.can_start_now,
            (j.action == Action.REQUEST_AUTHORISATION) == j.authorisation_needed,
            (j.action in (Action.DELAY, Action.REROUTE)) == j.route_must_change,
        )
    )
