"""3D no-fly volumes from NoFlyZone records: extruded footprints, a route check, and a
flight's geometric facts (`route_facts`) to give `decide` as known values.

Pure geometry over shapely and aware datetimes. Knows nothing of models, decoding or
plotting: records in, volumes, conflicts and facts out.
"""

from __future__ import annotations

import math
import numbers
from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Optional

from shapely import get_coordinates, make_valid
from shapely.affinity import translate
from shapely.geometry import LineString, Point
from shapely.geometry.base import BaseGeometry
from shapely.geometry.polygon import orient
from shapely.prepared import prep

from clover_struct.errors import UsageError
from clover_struct.schemas.airspace import NoFlyZone, daily_windows
from clover_struct.schemas.units import EARTH_RADIUS_M, TURNS, distance_m, unwrapped

# No terrain model here: for AMSL and STD (flight level) limits the ground is taken to lie
# at sea level, so a drone's height above ground is also its altitude. The demo region
# (Shanghai) lies 3-5 m above sea level, so the error is a few metres; flight levels are
# read as altitudes on a standard day.
GROUND_ELEVATION_M = 0.0
SAMPLE_SPACING_M = 50.0     # route legs are checked at points this far apart (at most)
MAX_SAMPLES_PER_LEG = 2000

# Altitude bands by ceiling (upper bound in metres, label), for colouring.
BANDS = ((150.0, "ceiling ≤ 150 m"), (500.0, "ceiling 150–500 m"), (1500.0, "ceiling 500–1500 m"),
         (math.inf, "ceiling > 1500 m or unlimited"))


@dataclass
class Volume:
    """One zone as a 3D volume: footprint (x=lon, y=lat, counter-clockwise; valid: the
    area a self-crossing vertex list encloses) between limits."""

    id: str
    zone: NoFlyZone
    footprint: BaseGeometry             # a Polygon; a MultiPolygon or collection when repaired
    floor_m: float
    ceiling_m: Optional[float]          # None: unlimited
    floor_ref: str
    ceiling_ref: Optional[str]
    valid_from: Optional[datetime]      # aware UTC; None: not stated
    valid_to: Optional[datetime]        # None: permanent / until further notice

    @property
    def band(self) -> int:
        """Index into BANDS."""
        top = math.inf if self.ceiling_m is None else self.ceiling_m
        return next(k for k, (bound, _) in enumerate(BANDS) if top <= bound)

    def limits_text(self) -> str:
        def one(m: Optional[float], ref: Optional[str]) -> str:
            return "UNL" if m is None else ("SFC" if m == 0 and ref == "AGL" else f"{m:.0f} m {ref}")
        return f"{one(self.floor_m, self.floor_ref)} – {one(self.ceiling_m, self.ceiling_ref)}"

    def active_during(self, start: datetime, end: datetime) -> bool:
        """Active at any instant of [start, end] (validity and daily schedule): of the part within
        the validity, its first day holds every minute of the day the schedule has, so its ends
        and the whole minutes between them are the instants to try (a schedule turns on a minute)."""
        t = max(start, self.valid_from or start)
        end = min(end, self.valid_to or end, t + timedelta(days=1))
        instants, minute = [t, end], t.replace(second=0, microsecond=0) + timedelta(minutes=1)
        while minute < end:
            instants.append(minute)
            minute += timedelta(minutes=1)
        return t <= end and any(self.zone.active_at(x) for x in instants)


def volume(zone_id: str, zone: NoFlyZone) -> Volume:
    """The zone's volume; ValueError for a record that defines no zone (area null)."""
    if not isinstance(zone, NoFlyZone):
        raise UsageError(f"zone {zone_id!r} is a {type(zone).__name__}: give NoFlyZone records (extract's results)")
    if not zone.defines_zone:
        raise ValueError(f"{zone_id}: the notice defines no zone")
    # A vertex list that crosses itself is no valid polygon, and shapely's overlays fail on it
    # (the map cut it at the frame): geometry takes the area it encloses (make_valid, maybe
    # several pieces), and the exports write those pieces.
    shape = orient(zone.footprint(), sign=1.0)
    return Volume(zone_id, zone, shape if shape.is_valid else make_valid(shape), zone.floor_m, zone.ceiling_m,
                  zone.floor_ref, zone.ceiling_ref, zone.valid_from, zone.valid_to)


def volumes(records: list[tuple[str, NoFlyZone]]) -> list[Volume]:
    """The volumes of the records that define a zone (the others restrict nothing)."""
    if not isinstance(records, (list, tuple)) or not all(isinstance(r, tuple) and len(r) == 2 for r in records):
        raise UsageError("volumes takes a list of (id, NoFlyZone) pairs, such as [('notice-1', zone)]")
    return [volume(i, z) for i, z in records if not isinstance(z, NoFlyZone) or z.defines_zone]


def checked(vols: list[Volume]) -> list[Volume]:
    """`vols`, or UsageError where it is no list of Volumes (volumes() makes them of records) or
    two share an id (the exports' feature ids)."""
    if not isinstance(vols, (list, tuple)) or not all(isinstance(v, Volume) for v in vols):
        kinds = sorted({type(v).__name__ for v in vols}) if isinstance(vols, (list, tuple)) else [type(vols).__name__]
        raise UsageError(f"give the zones' volumes, a list of Volume, not {', '.join(kinds)}: volumes([(id, zone), "
                         "...]) makes them of NoFlyZone records")
    if twice := sorted(str(i) for i, n in Counter(v.id for v in vols).items() if n > 1):
        raise UsageError(f"volume ids {', '.join(twice)} are given twice: each zone needs an id of its own")
    return vols


# -- route check -------------------------------------------------------------------------------
@dataclass
class Waypoint:
    lat: float
    lon: float
    alt_m: float        # above ground level
    time: datetime      # aware UTC


@dataclass
class Crossing:
    """A leg's pass through a zone's footprint: a conflict, or why it is not one."""

    leg: int                    # 1-based: leg k runs from waypoint k-1 to waypoint k
    zone_id: str
    enter: datetime             # first and last sampled instants inside the footprint
    leave: datetime
    conflict: bool
    conflict_from: Optional[datetime] = None   # first and last instants inside the volume
    conflict_to: Optional[datetime] = None
    why: str = ""               # for a non-conflict: inactive, below the floor, above the ceiling


def altitude_in(ref: Optional[str], alt_agl: float) -> float:
    """A height above ground as a number in a limit's reference (see GROUND_ELEVATION_M)."""
    return alt_agl if ref in (None, "AGL") else alt_agl + GROUND_ELEVATION_M


def inside(v: Volume, lat: float, lon: float, alt_agl: float, when: datetime) -> bool:
    """NoFlyZone.contains with the altitude in the zone's own reference. Both limits get the
    same number: with the ground at sea level AGL, AMSL and STD coincide."""
    return v.zone.contains(lat, lon, altitude_in(v.floor_ref, alt_agl), when)


def samples(a: Waypoint, b: Waypoint, also: list[float] = ()) -> list[Waypoint]:
    """Points along a leg, linear in lat, lon, altitude and time (legs are a few km long), the
    short way round: across the antimeridian, longitudes run past 180. `also`: fractions of
    the leg to hold besides (where it crosses a footprint's edge)."""
    n = min(MAX_SAMPLES_PER_LEG, max(1, math.ceil(distance_m((a.lat, a.lon), (b.lat, b.lon)) / SAMPLE_SPACING_M)))
    b_lon = unwrapped([(a.lat, a.lon), (b.lat, b.lon)])[1][1]
    return [Waypoint(a.lat + (b.lat - a.lat) * f, a.lon + (b_lon - a.lon) * f, a.alt_m + (b.alt_m - a.alt_m) * f,
                     a.time + (b.time - a.time) * f) for f in sorted({k / n for k in range(n + 1)} | set(also))]


def _edges(path: LineString, shape: BaseGeometry, turn: float) -> list[float]:
    """Fractions of `path` (shifted by `turn`) where it crosses `shape`'s edge."""
    if path.length == 0:
        return []
    return [path.project(Point(x - turn, y), normalized=True)
            for x, y in get_coordinates(translate(path, xoff=turn).intersection(shape))]


def _bounds(v: Volume, a: Waypoint, b: Waypoint) -> list[float]:
    """Fractions of the leg a->b where its height meets the zone's floor or ceiling, and where the
    zone comes into force or last is: its validity's ends, each day's windows' first instant and
    last (a window holds its last minute whole)."""
    out = []
    low, high = altitude_in(v.floor_ref, a.alt_m), altitude_in(v.floor_ref, b.alt_m)
    for limit in (v.floor_m, v.ceiling_m):
        if limit is not None and low != high:
            out.append((limit - low) / (high - low))
    span = (b.time - a.time).total_seconds()
    if span <= 0:
        return [f for f in out if 0 < f < 1]
    instants = [t for t in (v.valid_from, v.valid_to) if t is not None]
    if windows := daily_windows(v.zone.schedule):
        shift = timedelta(hours=v.zone.utc_offset_hours)   # the schedule's clock
        start = a.time.astimezone(timezone.utc)   # (the schedule's midnight, whatever clock the route is in)
        day = (start + shift).replace(hour=0, minute=0, second=0, microsecond=0) - shift
        while day <= b.time:
            instants += [day + timedelta(minutes=m) - timedelta(microseconds=last)
                         for start, end in windows for m, last in ((start, 0), (end + 1, 1))]
            day += timedelta(days=1)
    out += [(t - a.time).total_seconds() / span for t in instants]
    return [f for f in out if 0 < f < 1]


def _turn(shape: BaseGeometry, geom: BaseGeometry) -> float | None:
    """The shift in longitude (none, or a turn east or west: either may lie past 180) at which
    `geom` meets `shape`; None where it meets it at none."""
    return next((turn for turn in TURNS if shape.intersects(translate(geom, xoff=turn))), None)


def _why_not(v: Volume, p: Waypoint) -> str:
    if not v.zone.active_at(p.time):
        return "zone not active then"
    if altitude_in(v.floor_ref, p.alt_m) < v.floor_m:
        return f"below its floor ({v.floor_m:.0f} m {v.floor_ref})"
    return f"above its ceiling ({v.ceiling_m:.0f} m {v.ceiling_ref})"


def _position(k: int, lat, lon) -> None:
    """UsageError unless point k of a route is a (lat, lon) pair of degrees on the Earth: numbers
    (a string "0.0" had passed, then failed the distances as a bare TypeError)."""
    if not (_number(lat) and _number(lon) and -90 <= lat <= 90 and -180 <= lon <= 180):
        raise UsageError(f"route point {k} is ({lat!r}, {lon!r}): give (latitude, longitude) in degrees, "
                         f"latitude -90..90 and longitude -180..180, in that order")


def _number(x) -> bool:
    """A real number (not a bool, not a string of one)."""
    return isinstance(x, numbers.Real) and not isinstance(x, bool)


def _checked(height_m, start: datetime, end: datetime) -> None:
    """UsageError unless a height (metres above ground) and a window are ones a flight can have."""
    if not (_number(height_m) and math.isfinite(height_m)):
        raise UsageError(f"height {height_m!r}: give the flight's height above ground in metres, a finite number")
    if not all(isinstance(t, datetime) and t.tzinfo is not None for t in (start, end)):
        raise UsageError(f"the window ({start!r}, {end!r}): give timezone-aware datetimes, e.g. "
                         f"datetime(..., tzinfo=timezone.utc)")
    if end < start:
        raise UsageError(f"the flight ends ({end.isoformat()}) before it starts ({start.isoformat()}): "
                         f"give the window as start, end")


def check_route(route: list[Waypoint], vols: list[Volume]) -> list[Crossing]:
    """Every (leg, zone) pair whose footprint the leg enters, by leg, then time of entry."""
    if not isinstance(route, (list, tuple)) or not all(isinstance(w, Waypoint) for w in route):
        raise UsageError("check_route takes a list of Waypoint(lat, lon, alt_m, time); for (lat, lon) points at "
                         "one height over a window, use route_facts")
    if len(route) < 2:
        raise UsageError(f"a route of {len(route)} waypoints has no leg: give at least two (a hover: two "
                         f"at one place, at its start and end times)")
    checked(vols)
    for k, (w, after) in enumerate(zip(route, route[1:] + [None])):
        _position(k, w.lat, w.lon)
        _checked(w.alt_m, w.time, after.time if after else w.time)
    out: list[Crossing] = []
    for k, (a, b) in enumerate(zip(route, route[1:]), start=1):
        path = LineString([(lon, lat) for lat, lon in unwrapped([(a.lat, a.lon), (b.lat, b.lon)])])   # as samples runs
        for v in vols:
            if (turn := _turn(v.footprint, path)) is None:
                continue
            # every place the leg may enter the volume (its footprint, its limits, its hours) is a
            # bound, or the middle between two: a zone narrower than the samples' spacing, or in
            # force for part of a hover, is met there
            cuts = sorted({0.0, 1.0, *_edges(path, v.footprint, turn), *_bounds(v, a, b)})
            points = samples(a, b, cuts + [(f + g) / 2 for f, g in zip(cuts, cuts[1:])])
            shape = prep(v.footprint)
            over = [p for p in points if shape.covers(Point(p.lon + turn, p.lat))]
            if not over:
                continue
            hits = [p for p in over if inside(v, p.lat, p.lon, p.alt_m, p.time)]
            out.append(Crossing(k, v.id, over[0].time, over[-1].time, bool(hits),
                                hits[0].time if hits else None, hits[-1].time if hits else None,
                                "" if hits else _why_not(v, over[0])))
    return sorted(out, key=lambda c: (c.leg, c.enter))


def passages(route: list[tuple[float, float]], height_m: float, start: datetime, end: datetime,
             zones: list[NoFlyZone]) -> list[tuple[bool, bool, bool]]:
    """Per zone, for a flight of (lat, lon) points at height_m above ground during [start, end]:
    does the track enter its footprint, and, if it does, is the height within its limits and
    is it in force during the window (both False for a zone not entered, all three for a
    record that defines no zone). One point is a flight that stays there."""
    if not route:
        raise UsageError("the route has no points: give the flight's (latitude, longitude) points in degrees")
    for k, point in enumerate(route):
        if not (isinstance(point, (tuple, list)) and len(point) == 2):
            raise UsageError(f"route point {k} is {point!r}: give each point as a (latitude, longitude) pair")
        _position(k, *point)
    _checked(height_m, start, end)
    if kinds := {type(z).__name__ for z in zones if not isinstance(z, NoFlyZone)}:
        raise UsageError(f"zones hold {', '.join(sorted(kinds))}: give NoFlyZone records (extract's results)")
    route = unwrapped(route)   # the short way round, across the antimeridian
    track = LineString([(lon, lat) for lat, lon in route]) if len(route) > 1 else Point(route[0][1], route[0][0])
    out = []
    for k, zone in enumerate(zones):
        if not zone.defines_zone:   # a notice with no zone restricts nothing
            out.append((False, False, False))
            continue
        v = volume(str(k), zone)
        if _turn(v.footprint, track) is None:
            out.append((False, False, False))
            continue
        within = v.floor_m <= altitude_in(v.floor_ref, height_m) and (
            v.ceiling_m is None or altitude_in(v.ceiling_ref, height_m) <= v.ceiling_m)
        out.append((True, within, v.active_during(start, end)))
    return out


def route_facts(route: list[tuple[float, float]], height_m: float, start: datetime, end: datetime,
                zones: list[NoFlyZone]) -> dict[str, bool]:
    """What geometry answers about the flight, under DispatchJudgments' names, to pass to
    `decide` as known facts (see facts_of)."""
    return facts_of(passages(route, height_m, start, end, zones))


def facts_of(passages: list[tuple[bool, bool, bool]]) -> dict[str, bool]:
    """From a flight's passages: does the track enter a zone's footprint (crosses_zone), is the
    height within the limits of a zone it enters (vertical_overlap), is such a zone in force
    during the window (time_overlap), and is one zone entered within its limits while in
    force (conflict)."""
    return {"crosses_zone": any(e for e, _, _ in passages), "vertical_overlap": any(w for _, w, _ in passages),
            "time_overlap": any(f for _, _, f in passages), "conflict": any(all(p) for p in passages)}
