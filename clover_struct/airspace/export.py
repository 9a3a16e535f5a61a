"""Zones out: GeoJSON (RFC 7946) feature collections of the extracted volumes, and ED-318
(EUROCAE) UAS geographical zone datasets, the format drone operators' systems read.

Knows nothing of models or decoding: Volumes (geometry.py) in, JSON-ready dicts out.
"""

from __future__ import annotations

import itertools
import re
from datetime import datetime, timezone
from typing import Optional

from shapely import set_precision
from shapely.affinity import translate
from shapely.geometry import Polygon, box
from shapely.geometry.base import BaseGeometry
from shapely.geometry.polygon import orient

from ..errors import UsageError
from ..schemas.airspace import daily_windows
from .geometry import Volume, checked


def _iso(t: Optional[datetime]) -> Optional[str]:
    return None if t is None else t.astimezone(timezone.utc).isoformat().replace("+00:00", "Z")


def _rings(shape: Polygon) -> list[list[list[float]]]:
    shape = orient(shape, sign=1.0)   # RFC 7946 3.1.6: exterior rings counter-clockwise, holes clockwise
    return [[[round(x, 7), round(y, 7)] for x, y in ring.coords] for ring in (shape.exterior, *shape.interiors)]


def _geometry(shape: BaseGeometry) -> dict:
    """A footprint as a GeoJSON Polygon, or a MultiPolygon where it comes in pieces: a
    self-crossing boundary's parts, or a zone cut at the antimeridian (RFC 7946 3.1.9), each
    piece's longitudes within +-180, its corners on the 1e-7 degree grid the files are written
    to (a sliver the grid folds flat is left out)."""
    pieces = []
    for turn in (-360.0, 0.0, 360.0):
        part = set_precision(translate(shape.intersection(box(-180 + turn, -90, 180 + turn, 90)), xoff=-turn), 1e-7)
        pieces += [p for p in getattr(part, "geoms", [part]) if isinstance(p, Polygon) and not p.is_empty]
    if len(pieces) == 1:
        return {"type": "Polygon", "coordinates": _rings(pieces[0])}
    return {"type": "MultiPolygon", "coordinates": [_rings(p) for p in pieces]}


def feature(v: Volume) -> dict:
    z = v.zone
    return {
        "type": "Feature",
        "id": v.id,
        "geometry": _geometry(v.footprint),   # [lon, lat]
        "properties": {
            "id": v.id, "notam_id": z.notam_id, "kind": z.area.kind,
            "floor_m": round(v.floor_m, 1), "ceiling_m": None if v.ceiling_m is None else round(v.ceiling_m, 1),
            "refs": {"floor": v.floor_ref, "ceiling": v.ceiling_ref},
            "valid_from": _iso(v.valid_from), "valid_to": _iso(v.valid_to),
            "schedule": z.schedule, "utc_offset_hours": z.utc_offset_hours,   # (the schedule's clock)
            "uas_only": z.uas_only, "reason": z.reason,
        },
    }


def geojson(vols: list[Volume]) -> dict:
    return {"type": "FeatureCollection", "features": [feature(v) for v in checked(vols)]}


ED318_REFS = {"STD": "AMSL"}   # ours -> ED-318's where they differ (it has no pressure reference)


def _layer(v: Volume) -> Optional[dict]:
    """ED-318's vertical layer in metres; None when the zone has no ceiling (ED-318 writes no
    "unlimited"). A flight level is pressure altitude: written AMSL at its height in the
    standard atmosphere."""
    if v.ceiling_m is None:
        return None
    return {"upper": round(v.ceiling_m, 1), "upperReference": ED318_REFS.get(v.ceiling_ref, v.ceiling_ref),
            "lower": round(v.floor_m, 1), "lowerReference": ED318_REFS.get(v.floor_ref, v.floor_ref), "uom": "m"}


def _daily(windows: list[tuple[int, int]], utc_offset_hours: float) -> list[dict]:
    """Daily windows in the notice's clock as ED-318 daily periods in UTC: one that runs past
    midnight there (2200-0600, or 0600-1000 at +8) in two, one that ends at 2400 at 23:59:59
    (24:00:00 is midnight, the day's start); none for a zone in force all day."""
    periods = []
    for a, b in windows:
        length = (b - a) % 1440 or (1440 if b != a else 0)
        if length == 1440:
            return []
        start = (a - round(utc_offset_hours * 60)) % 1440
        end = start + length
        for a, b in [(start, end)] if end <= 1440 else [(start, 1440), (0, end - 1440)]:
            periods.append({"day": ["ANY"], "startTime": _clock(a), "endTime": _clock(b)})
    return periods


def _clock(minute: int) -> str:
    return "23:59:59Z" if minute == 1440 else f"{minute // 60:02d}:{minute % 60:02d}:00Z"


# ED-318 4.2.5.4: a zone's identifier is 1 to 7 letters, digits, '_' or '-'
_IDENTIFIER = re.compile(r"[A-Za-z0-9_-]{1,7}")


def _identifiers(ids: list[str]) -> list[str]:
    """ED-318 identifiers for volumes of these ids: the id where it is one, else Z and a number
    no other zone of the dataset takes (features keep the volumes' order)."""
    kept = {i for i in ids if _IDENTIFIER.fullmatch(i)}
    fresh = (z for n in itertools.count(1) if (z := f"Z{n}") not in kept)
    return [i if i in kept else next(fresh) for i in ids]


def ed318_zone(v: Volume, country: str, lang: str = "en", identifier: Optional[str] = None) -> dict:
    """One volume as an ED-318 feature: a circle as a Point with a Circle extent (radius in
    metres), any other area as a Polygon; a UASZone of type PROHIBITED whose applicability is
    the validity and the daily windows, whose reason is the notice's own words. `identifier`:
    the zone's (ED-318's form), else the volume's id where it has that form."""
    z = v.zone
    if z.radius_m is not None:
        geometry = {"type": "Point", "coordinates": [round(z.center_lon, 7), round(z.center_lat, 7)],
                    "extent": {"subType": "Circle", "radius": round(z.radius_m, 1)}}
    else:
        geometry = _geometry(v.footprint)
    if (layer := _layer(v)) is not None:
        geometry["layer"] = layer
    period = {"startDateTime": _iso(v.valid_from), "endDateTime": _iso(v.valid_to)}
    if daily := _daily(daily_windows(z.schedule), z.utc_offset_hours):
        period["schedule"] = daily
    identifier = identifier or _identifiers([str(v.id)])[0]
    zone = {"identifier": identifier, "country": country, "name": [{"text": z.notam_id or v.id, "lang": lang}],
            "type": "PROHIBITED", "variant": "COMMON", "zoneAuthority": [{"purpose": "INFORMATION"}],
            "limitedApplicability": [{k: x for k, x in period.items() if x is not None}]}
    if z.reason:
        zone |= {"reason": ["OTHER"], "otherReasonInfo": [{"text": z.reason, "lang": lang}]}
    return {"type": "Feature", "properties": zone, "geometry": geometry}


def ed318(vols: list[Volume], country: str, lang: str = "en") -> dict:
    """The volumes as an ED-318 dataset (a FeatureCollection of UAS zones). `country`: the ISO
    3166-1 alpha-3 code of the state the zones lie in (a notice does not say it reliably);
    `lang`: the language tag of the texts."""
    if not (isinstance(country, str) and len(country) == 3 and country.isalpha() and country.isupper()):
        raise UsageError(f"country takes an ISO 3166-1 alpha-3 code such as 'CHN' or 'GBR', not {country!r}")
    vols = checked(vols)
    ids = _identifiers([str(v.id) for v in vols])
    return {"type": "FeatureCollection", "metadata": {"provider": [{"text": "clover-struct", "lang": lang}]},
            "features": [ed318_zone(v, country, lang, i) for v, i in zip(vols, ids)]}
