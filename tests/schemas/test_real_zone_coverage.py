"""Can NoFlyZone hold every labelled real zone as pieces of its own notice?

For each notice of ../shared/data/zones-dev.jsonl (kept outside the repository on purpose;
skipped where absent) the record is built from pieces of the text alone, as a perfect
extractor would copy them: the coordinates in order, the radius, items F/G (or a MAX HGT
in item E), items B/C. The record must validate, and its read values must be the labelled
ones. Nothing from the data is stored here; failures print ids only.
"""

import json
import re
from datetime import datetime
from pathlib import Path

import pytest

from clover_struct.schemas.airspace import LAT_PIECE, LON_PIECE, NoFlyZone
from clover_struct.schemas.readers import read_coordinate, read_radius

DEV = Path(__file__).resolve().parents[2].parent / "shared/data/zones-dev.jsonl"
pytestmark = pytest.mark.skipif(not DEV.exists(), reason=f"real notices not present at {DEV}")
ITEM = re.compile(r"\b([BCFG])\) ?(.*?)\s*(?=\b[A-G]\)|$)")
RADIUS = re.compile(r"\d[\d.]*\s?(?:NM|KM|M|FT)\b")
MAX_HGT = re.compile(r"MAX HGT (\d+FT (?:AGL|AMSL))")


def _edge(text: str, i: int) -> bool:
    """Where a verbatim piece may start or end: not inside a run of ASCII digits or of letters."""
    if i in (0, len(text)):
        return True
    a, b = text[i - 1], text[i]
    return not (a.isdigit() and b.isdigit() or a.isascii() and a.isalpha() and b.isascii() and b.isalpha())


def points(flat: str) -> list[tuple[str, str, float, float]]:
    """(lat piece, lon piece) pairs of item E, in order, with their read values: at each word
    edge the longest piece the schema admits as a coordinate with a hemisphere (the schema's
    own patterns, so a piece a line end cut, 'N384 3', is found whole)."""
    body, found, i = flat[flat.index("E) "):], [], 0
    while i < len(body):
        hit = None
        if _edge(body, i):
            for end in range(min(len(body), i + 18), i, -1):
                piece = body[i:end]
                if not _edge(body, end) or not re.search("[NSEWnsew北南东西]", piece):
                    continue
                for axis, pattern in (("lat", LAT_PIECE), ("lon", LON_PIECE)):
                    if re.fullmatch(pattern, piece):
                        try:
                            hit = (piece, axis, read_coordinate(piece, axis), end)
                        except ValueError:
                            continue
                        break
                if hit:
                    break
        if hit:
            found.append(hit)
            i = hit[3]
        else:
            i += 1
    return [(a[0], b[0], a[2], b[2]) for a, b in zip(found, found[1:]) if (a[1], b[1]) == ("lat", "lon")]


def record(row) -> NoFlyZone:
    flat, zone = " ".join(row["text"].split()), row["zone"]
    items = {k: v for k, v in ITEM.findall(flat)}
    pts = points(flat)
    if zone["shape"] == "circle":
        lat, lon = next((a, b) for a, b, x, y in pts if abs(x - zone["center_lat"]) < 1e-4
                        and abs(y - zone["center_lon"]) < 1e-4)
        radius = next(r for r in RADIUS.findall(flat) if abs(read_radius(r) - zone["radius_m"]) < 0.01)
        area = {"kind": "circle", "center": {"lat": lat, "lon": lon}, "radius": radius}
    else:
        want, got = zone["polygon"], []
        for a, b, x, y in pts:   # the labelled vertices in order, then a closing repeat if written
            k = len(got)
            if k < len(want) and abs(x - want[k][0]) < 1e-4 and abs(y - want[k][1]) < 1e-4:
                got.append({"lat": a, "lon": b})
            elif k == len(want) and abs(x - want[0][0]) < 1e-4 and abs(y - want[0][1]) < 1e-4:
                got.append({"lat": a, "lon": b})
                break
        area = {"kind": "polygon", "vertices": got}
    upper = items.get("G")
    ceiling = None if upper in (None, "UNL") else upper
    if upper is None and (m := MAX_HGT.search(flat)):
        ceiling = m[1]
    return NoFlyZone(notam_id=flat.split()[0], floor=items.get("F"), ceiling=ceiling,
                     valid_from_raw=items["B"][:10], valid_to_raw=items["C"][:10] if items.get("C") else None,
                     uas_only=zone["uas_only"], area=area)


def test_every_real_zone_is_a_record_of_pieces_of_its_notice():
    bad, rows = [], [json.loads(line) for line in DEV.open(encoding="utf-8")]
    for row in rows:
        zone = row["zone"]
        try:
            z = record(row)
            if zone["shape"] == "circle":
                assert (z.center_lat, z.center_lon, z.radius_m) == pytest.approx(
                    (zone["center_lat"], zone["center_lon"], zone["radius_m"]), abs=1e-3)
            else:
                flat = lambda pts: [x for p in pts for x in p]  # noqa: E731  approx does not nest
                assert len(z.polygon) == len(zone["polygon"])
                assert flat(z.polygon) == pytest.approx(flat(zone["polygon"]), abs=1e-4)
            assert (z.floor_m, z.floor_ref) == pytest.approx((zone["floor_m"], zone["floor_ref"]))
            assert z.ceiling_ref == zone["ceiling_ref"]
            assert z.ceiling_m == (None if zone["ceiling_m"] is None else pytest.approx(zone["ceiling_m"], abs=0.01))
            for key in ("valid_from", "valid_to"):
                want = zone[key] and datetime.fromisoformat(zone[key].replace("Z", "+00:00"))
                assert getattr(z, key) == want
        except (AssertionError, ValueError, StopIteration, KeyError) as e:
            bad.append(f"{row['id']}: {type(e).__name__}")
    print(f"{len(rows) - len(bad)} of {len(rows)} real zones held as pieces of their notices")
    assert len(rows) == 300 and not bad, bad[:20]
