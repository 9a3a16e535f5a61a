"""An ICAO NOTAM as a pydantic model: copyable fields plus decoded properties.

The fields hold only what can be copied from the notice (Q-line parts as written,
items A-D, F, G); decimal degrees, flight levels as ints and UTC datetimes are computed
by properties from those copies, so an extractor never does arithmetic. Item E (free
text) is not a field; precise zones in it are the business of ``airspace.NoFlyZone``.
Knows nothing of models, decoding or how notices are generated.

Conventions matching the reference values of the real-notice evaluation set: a blank
Q-line part (``KZXY/QOBXX/IV/M//000//...``) is None here where the reference writes '';
padded parts (``M  /A /``) are copied trimmed; ``valid_to`` is None for ``C) PERM``.
Item C is copied whole (``PERM``, ``2507011200``, ``2507011200EST``): ``permanent`` and
``estimated`` are read from the copy, so the model answers no yes/no question for them.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from .units import Q_COORDINATES, TIME10, VERBATIM, parse_q_coordinates, parse_yymmddhhmm

NOTAM_ID = r"^[A-Z]?\d{1,4}/\d{2,4}$"  # A1234/23 (ICAO series/number/year), 07/215 (FAA)
# Item C as written: PERM, or YYMMDDhhmm (checked digit by digit like item B) with EST for an estimate.
ITEM_C = rf"^(PERM|({TIME10[1:-1]}|\d{{2}}(0[1-9]|1[0-2])(0[1-9]|[12]\d|3[01])2400)( ?EST)?)$"   # an end at 2400 too
# Items F/G as published: SFC, GND, UNL, FL195, 1800FT AMSL, 150M AGL, 500 FT MSL.
LIMIT_TEXT = r"^(SFC|GND|UNL|FL ?\d{2,3}|\d{1,6}(\.\d{1,3})? ?(FT|M)( ?(AMSL|AGL|MSL|SFC|GND))?)$"

Traffic = Literal["I", "V", "IV", "K"]
Purpose = Literal["NBO", "NB", "BO", "B", "O", "M", "K"]
Scope = Literal["A", "E", "W", "AE", "AW", "EW", "AEW", "K"]


def _time_of(raw: Optional[str]) -> Optional[datetime]:
    """Item B or C as written -> UTC datetime; None when absent or PERM (an EST suffix is not part of the time)."""
    return None if raw in (None, "PERM") else parse_yymmddhhmm(raw[:10])


class Notam(BaseModel):
    """One ICAO-format NOTAM (ICAO, European AIS and FAA international layouts)."""

    model_config = ConfigDict(extra="forbid")

    notam_id: Optional[str] = Field(
        None, pattern=NOTAM_ID, json_schema_extra=VERBATIM,
        description="NOTAM number from the header, e.g. A1234/23 or 07/215; null if no header",
    )
    notam_type: Optional[Literal["NOTAMN", "NOTAMR", "NOTAMC"]] = Field(
        None, description="NOTAMN new, NOTAMR replacing, NOTAMC cancelling; null if no header"
    )
    replaces: Optional[str] = Field(
        None, pattern=NOTAM_ID, json_schema_extra=VERBATIM,
        description="number of the NOTAM this one replaces or cancels (after NOTAMR/NOTAMC)",
    )
    fir: str = Field(pattern=r"^[A-Z]{3,4}$", json_schema_extra=VERBATIM,
                     description="Q-line part 1: FIR designator, e.g. ZQXW (FAA may use 3 letters)")
    qcode: Optional[str] = Field(None, pattern=r"^Q[A-Z]{4}$", json_schema_extra=VERBATIM,
                                 description="Q-line part 2: NOTAM code, Q plus 4 letters")
    traffic: Optional[Traffic] = Field(None, description="Q-line part 3: traffic I (IFR), V (VFR), IV (both), K (checklist)")
    purpose: Optional[Purpose] = Field(None, description="Q-line part 4 without padding spaces, e.g. NBO, BO, M")
    scope: Optional[Scope] = Field(
        None, description="Q-line part 5 without padding: A aerodrome, E en-route, W nav warning, or a combination"
    )
    q_lower: str = Field(pattern=r"^\d{3}$", json_schema_extra=VERBATIM,
                         description="Q-line part 6: lower limit, three digits as written, e.g. 000")
    q_upper: Optional[str] = Field(
        None, pattern=r"^\d{3}$", json_schema_extra=VERBATIM,
        description="Q-line part 7: upper limit, three digits, e.g. 999; null if blank",
    )
    q_coordinates: str = Field(pattern=Q_COORDINATES, json_schema_extra=VERBATIM,
                               description="Q-line centre as written without radius, e.g. 4730N00845W")
    q_radius: str = Field(pattern=r"^\d{3}$", json_schema_extra=VERBATIM,
                          description="Q-line radius in NM, last three digits as written, e.g. 005")
    location: str = Field(pattern=r"^[A-Z]{4}( [A-Z]{4}){0,7}$", json_schema_extra=VERBATIM,
                          description="item A: ICAO location indicator(s), space-separated")
    valid_from_raw: str = Field(pattern=TIME10, json_schema_extra=VERBATIM,
                                description="item B: start as written, YYMMDDhhmm UTC")
    valid_to_raw: Optional[str] = Field(
        None, pattern=ITEM_C, json_schema_extra=VERBATIM,
        description="item C as written: YYMMDDhhmm UTC, with EST if estimated, or PERM; null if absent",
    )
    schedule: Optional[str] = Field(
        None, max_length=200, description="item D: schedule as written, e.g. MON-FRI 0630-1415; null if absent",
        json_schema_extra={"max_tokens": 64, **VERBATIM},
    )
    lower: Optional[str] = Field(None, pattern=LIMIT_TEXT, max_length=24, json_schema_extra=VERBATIM,
                                 description="item F as written, e.g. SFC")
    upper: Optional[str] = Field(None, pattern=LIMIT_TEXT, max_length=24, json_schema_extra=VERBATIM,
                                 description="item G as written, e.g. 1800FT AMSL")

    @field_validator("valid_from_raw", "valid_to_raw")
    @classmethod
    def _real_time(cls, v: Optional[str]) -> Optional[str]:
        _time_of(v)  # raises ValueError naming the value
        return v

    @field_validator("q_coordinates")
    @classmethod
    def _real_centre(cls, v: str) -> str:
        parse_q_coordinates(v)
        return v

    @model_validator(mode="after")
    def _consistent(self) -> "Notam":
        if self.valid_to is not None and self.valid_to < self.valid_from:
            raise ValueError(f"item C {self.valid_to_raw} is before item B {self.valid_from_raw}")
        if self.q_upper is not None and int(self.q_upper) < int(self.q_lower):
            raise ValueError(f"Q-line upper limit {self.q_upper} is below the lower limit {self.q_lower}")
        if self.replaces is not None and self.notam_type not in ("NOTAMR", "NOTAMC"):
            raise ValueError("`replaces` is only meaningful for NOTAMR or NOTAMC")
        return self

    @property
    def lower_fl(self) -> int:
        return int(self.q_lower)

    @property
    def upper_fl(self) -> Optional[int]:
        return None if self.q_upper is None else int(self.q_upper)

    @property
    def center_lat(self) -> float:
        # Q-line precision is one arc minute; six decimals keeps it exact to well below that.
        return round(parse_q_coordinates(self.q_coordinates)[0], 6)

    @property
    def center_lon(self) -> float:
        return round(parse_q_coordinates(self.q_coordinates)[1], 6)

    @property
    def radius_nm(self) -> int:
        return int(self.q_radius)

    @property
    def valid_from(self) -> datetime:
        return _time_of(self.valid_from_raw)

    @property
    def valid_to(self) -> Optional[datetime]:
        return _time_of(self.valid_to_raw)

    @property
    def permanent(self) -> bool:
        return self.valid_to_raw == "PERM"

    @property
    def estimated(self) -> bool:
        return self.valid_to_raw is not None and self.valid_to_raw.endswith("EST")
