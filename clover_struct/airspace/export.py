"""Zones out: GeoJSON (RFC 7946) feature collections of the extracted volumes.

Knows nothing of models or decoding: Volumes (geometry.py) in, JSON-ready dicts out.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Optional

from shapely.geometry import Polygon
from shapely.geometry.polygon import orient

from .geometry import Volume


def _iso(t: Optional[datetime]) -> Optional[str]:
    return None if t is None else t.astimezone(timezone.utc).isoformat().replace("+00:00", "Z")


def _ring(shape: Polygon) -> list[list[float]]:
    ring = orient(shape, sign=1.0).exterior   # RFC 7946 3.1.6: exterior rings counter-clockwise
    coords = [[round(x, 7), round(y, 7)] for x, y in ring.coords]
    if coords[0] != coords[-1]:
        coords.append(coords[0])
    return coords


def feature(v: Volume) -> dict:
    z = v.zone
    return {
        "type": "Feature",
        "id": v.id,
        "geometry": {"type": "Polygon", "coordinates": [_ring(z.footprint())]},   # [lon, lat], as written
        "properties": {
            "id": v.id, "notam_id": z.notam_id, "kind": z.area.kind,
            "floor_m": round(v.floor_m, 1), "ceiling_m": None if v.ceiling_m is None else round(v.ceiling_m, 1),
            "refs": {"floor": v.floor_ref, "ceiling": v.ceiling_ref},
            "valid_from": _iso(v.valid_from), "valid_to": _iso(v.valid_to),
            "schedule": z.schedule, "uas_only": z.uas_only, "reason": z.reason,
        },
    }


def geojson(vols: list[Volume]) -> dict:
    return {"type": "FeatureCollection", "features": [feature(v) for v in vols]}
