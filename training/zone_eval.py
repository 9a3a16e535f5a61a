"""NoFlyZone on real text: footprints scored by intersection over union with the labelled
zone, limits and times by exact match, and "no zone" on text that defines none.

Two evaluation sets for training/evaluate.py:

- real_zones: the notices of ../shared/data/zones-dev.jsonl, each with a hand-checked zone.
  A footprint is right at IoU >= 0.9 with the labelled one (a labelled circle drawn as a
  128-point ring); floor, ceiling (within 1 m, same reference), validity (UTC instants)
  and uas_only by exact match.
- negatives: dev NOTAMs that define no zone (see `is_negative` for the rule) and seeded
  garbage text. "No zone" is a record whose area is null (NoFlyZone.defines_zone False), or
  an ExtractionError; on a zone notice the null area counts as no valid zone.

The real files are read at evaluation time and never copied into the repository. Knows
nothing of decoding: the model is only passed on to extract_many.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import random
import re
import string
from collections import Counter
from pathlib import Path

from shapely import make_valid, segmentize
from shapely.geometry import LineString, Polygon
from shapely.ops import unary_union

from clover_struct import ExtractionError, extract_many
from clover_struct.schemas import NoFlyZone, airspace

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
ZONES_DEV = DATA / "zones-dev.jsonl"
NOTAMS_DEV = DATA / "notams-dev.jsonl"
RING_POINTS = 128       # a labelled circle as a polygon of this many points (the data README's rule)
IOU_RIGHT = 0.9         # a footprint counts as right from this IoU up
LIMIT_TOLERANCE_M = 1.0
EDGE_STEP_DEG = 0.05    # footprint edges are cut this fine before projecting (about 5 km)
FIELDS = ("floor", "ceiling", "valid_from", "valid_to", "uas_only")
GARBAGE_PER_KIND = 5
GARBAGE_SEED = 20_261_203


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def spread(rows: list, limit: int | None) -> list:
    """`limit` rows evenly spaced over the file (all when limit is None or not smaller), so a
    subset keeps the file's mix of sources rather than its first ones."""
    if limit is None or limit >= len(rows):
        return rows
    return [rows[k * len(rows) // limit] for k in range(limit)]


# -- footprints ------------------------------------------------------------------------------
def circle_ring(lat: float, lon: float, radius_m: float, points: int = RING_POINTS) -> Polygon:
    """A labelled circle: the data README's ring of points at its radius."""
    return airspace.circle_ring(lat, lon, radius_m, points)


def labelled_footprint(zone: dict) -> Polygon:
    """The labelled zone's footprint: its circle as a ring, or its vertices as written."""
    if zone["shape"] == "circle":
        return circle_ring(zone["center_lat"], zone["center_lon"], zone["radius_m"])
    return Polygon([(lon, lat) for lat, lon in zone["polygon"]])


def _equal_area(shape: Polygon, lon0: float):
    # Sinusoidal projection about lon0: x = (lon - lon0) cos(lat), y = lat, which keeps areas,
    # so IoU is that of the zones on the sphere. Edges are straight in (lon, lat), as the
    # footprint and its GeoJSON draw them: they are cut into pieces of at most EDGE_STEP_DEG
    # first so that they stay so once projected (the ring is cut, not the polygon: GEOS
    # densifies a polygon through buffer(0), which drops a lobe of a self-crossing one).
    # Longitudes are taken within 180 degrees of lon0, so a zone across the antimeridian stays
    # one piece whether it says 179.9 or -180.1. A self-crossing ring is repaired to the area
    # it encloses, as airspace.geometry.volume does.
    def xy(lon, lat):
        dlon = (lon - lon0 + 180) % 360 - 180
        return dlon * math.cos(math.radians(lat)), lat

    out = Polygon([xy(*p) for p in segmentize(LineString(shape.exterior.coords), EDGE_STEP_DEG).coords])
    if out.is_valid:
        return out
    repaired = make_valid(out)  # may hold lines where the ring doubles back: keep the areas
    return unary_union([g for g in getattr(repaired, "geoms", [repaired]) if g.area > 0])


def iou(predicted: Polygon, labelled: Polygon) -> float:
    """Intersection over union of two (x=lon, y=lat) footprints, by area on the sphere."""
    lon0 = labelled.exterior.coords[0][0]  # a vertex: a centroid of 179 and -179 would be 0
    a, b = _equal_area(predicted, lon0), _equal_area(labelled, lon0)
    union = a.union(b).area
    return a.intersection(b).area / union if union > 0 else 0.0


# -- fields ----------------------------------------------------------------------------------
def _utc(text: str | None) -> dt.datetime | None:
    return None if text is None else dt.datetime.fromisoformat(text.replace("Z", "+00:00"))


def _metres_match(got: float | None, want: float | None) -> bool:
    if got is None or want is None:
        return got is None and want is None
    return abs(got - want) <= LIMIT_TOLERANCE_M


def field_hits(pred: NoFlyZone, zone: dict) -> dict[str, bool]:
    """Per field of FIELDS, does the extracted zone say what the labelled one does: limits in
    metres within LIMIT_TOLERANCE_M and the same reference (an unlimited ceiling matches only
    null), validity as the same UTC instant (null matches only null), uas_only equal."""
    return {
        "floor": _metres_match(pred.floor_m, zone["floor_m"]) and pred.floor_ref == zone["floor_ref"],
        "ceiling": _metres_match(pred.ceiling_m, zone["ceiling_m"]) and pred.ceiling_ref == zone["ceiling_ref"],
        "valid_from": pred.valid_from == _utc(zone["valid_from"]),
        "valid_to": pred.valid_to == _utc(zone["valid_to"]),
        "uas_only": pred.uas_only == zone["uas_only"],
    }


def error_kind(error: ExtractionError) -> str:
    """An error's field and reason with numbers blanked, so alike failures count together."""
    return re.sub(r"\d+(?:\.\d+)?", "#", f"{error.path}: {error.reason}")[:120]


def confidence_threshold(records: list[tuple[float, bool]]) -> dict | None:
    """The record confidence (its least sure field's, Trace.lowest) that best separates right
    records from wrong ones: the cut keeping the most right ones and setting aside the most
    wrong ones (their shares summed); with the shares it gives. None without both kinds."""
    right = sorted(c for c, ok in records if ok)
    wrong = sorted(c for c, ok in records if not ok)
    if not right or not wrong:
        return None

    def shares(t):
        return sum(c >= t for c in right) / len(right), sum(c < t for c in wrong) / len(wrong)
    best = max(sorted(set(right)), key=lambda t: (sum(shares(t)), -t))
    kept, set_aside = shares(best)
    return {"threshold": round(best, 4), "right_kept": kept, "wrong_set_aside": set_aside,
            "n_right": len(right), "n_wrong": len(wrong)}


def score_real_zones(model, limit: int | None = None, path: Path = ZONES_DEV) -> dict | None:
    """valid_rate, iou90 (share of all notices whose footprint reaches IOU_RIGHT), mean IoU,
    each field's exact match and their mean (field_em), all over every notice (a failed one
    scores 0 and matches nothing); valid and iou90 per labelled shape; the commonest errors;
    the confidence threshold that separates valid records right in every respect (footprint
    and fields) from the others. None when the file is absent."""
    if not path.is_file():
        return None
    rows = spread(read_jsonl(path), limit)
    preds = extract_many([r["text"] for r in rows], NoFlyZone, model=model, batch_size=16, trace=True)
    per_shape: dict[str, Counter] = {}
    fields, errors = Counter(), Counter()
    ious, judged = [], []
    for row, (pred, trace) in zip(rows, preds):
        zone = row["zone"]
        tally = per_shape.setdefault(zone["shape"], Counter())
        tally["n"] += 1
        if isinstance(pred, ExtractionError) or not pred.defines_zone:
            errors["area: no zone" if not isinstance(pred, ExtractionError) else error_kind(pred)] += 1
            ious.append(0.0)
            continue
        ious.append(iou(pred.footprint(), labelled_footprint(zone)))
        tally["valid"] += 1
        tally["iou90"] += ious[-1] >= IOU_RIGHT
        hits = field_hits(pred, zone)
        fields.update(k for k, ok in hits.items() if ok)
        if trace.lowest is not None:
            judged.append((trace.lowest[1], ious[-1] >= IOU_RIGHT and all(hits.values())))
    n = len(rows)
    rates = {k: fields[k] / n for k in FIELDS}
    return {"n": n, "valid_rate": sum(t["valid"] for t in per_shape.values()) / n,
            "iou90": sum(t["iou90"] for t in per_shape.values()) / n, "iou_mean": sum(ious) / n,
            **rates, "field_em": sum(rates.values()) / len(rates),
            "by_shape": {s: {"n": t["n"], "valid_rate": t["valid"] / t["n"], "iou90": t["iou90"] / t["n"]}
                         for s, t in sorted(per_shape.items())},
            "errors": dict(errors.most_common(6)), "confidence": confidence_threshold(judged)}


# -- negatives -------------------------------------------------------------------------------
_ITEM_E = re.compile(r"(?:^|\s)E\)\s*(.*?)(?=\s[FG]\)\s|\Z)", re.S)
_QCODE = re.compile(r"Q\)\s*[A-Z]{3,4}\s*/\s*Q([A-Z]{2})")
# A position in any notation a notice uses: digits then a hemisphere (513018N, 0002640W,
# 157952753W), a hemisphere then digits (N2609E11430), degrees with a sign (40°26'), decimal
# pairs (51.5074, -0.1278), Chinese 北纬/东经.
_POSITION = re.compile(r"\d{4,}(?:\.\d+)?\s?[NSEW](?![A-Z])|(?<![A-Z])[NSEW]\s?\d{4,}|\d°"
                       r"|-?\d{1,3}\.\d{3,}\s*[,/]\s*-?\d{1,3}\.\d{3,}|北纬|南纬|东经|西经")
# Wording that draws an area: a radius, a boundary, a list of points joined up, "within".
_ZONE_WORDING = re.compile(r"RADIUS|\bRAD\b|BOUNDED|POLYGON|LINES? JOINING|\bWI\b|\bWITHIN\b"
                           r"|AREA\s+(?:WI|DEFINED|BTN)|半径|范围内", re.I)
# Q-code subjects (its 2nd letter) of airspace that can be a zone though the text only names
# it: A airspace organisation (ATZ, CTR), R restricted/danger/prohibited areas, W warnings.
_AIRSPACE_SUBJECTS = "ARW"
_OBSTACLES = ("OB", "OL")   # obstacles and their lights: a point with a height, no volume


def item_e(text: str) -> str:
    """A NOTAM's item E (up to F) or G)), or the whole text when it has none."""
    found = _ITEM_E.search(text)
    return found.group(1) if found else text


def is_negative(text: str) -> bool:
    """Does this NOTAM define no zone, beyond reasonable doubt? Yes when its item E has no
    wording that draws an area (radius, bounded by, within, lines joining), its Q-code is not
    about airspace that a zone could stand for (subjects A, R, W: an activated danger area
    or ATZ is named, not drawn), and item E gives no position, unless the notice is about an
    obstacle (Q-code OB/OL: a crane's position and height restrict no volume). A notice in
    doubt is left out rather than counted either way."""
    e = item_e(text)
    if _ZONE_WORDING.search(e):
        return False
    q = _QCODE.search(text)
    subject = q.group(1) if q else ""
    if subject and subject[0] in _AIRSPACE_SUBJECTS:
        return False
    return subject in _OBSTACLES or not _POSITION.search(e)


_SYLLABLES = ("lo", "rem", "ip", "sum", "do", "lor", "sit", "am", "et", "con", "sec", "tur", "ad", "pis", "ci", "ng")


def garbage_texts(per_kind: int = GARBAGE_PER_KIND, seed: int = GARBAGE_SEED) -> dict[str, list[str]]:
    """Text with no notice in it, by kind: random bytes decoded as UTF-8 (bad ones replaced),
    lorem-like words, upper-case letter-and-digit groups (the look of a notice, no content),
    and near-empty strings (punctuation, one letter; blank text is refused before the model)."""
    rng = random.Random(seed)
    word = lambda: "".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(1, 4)))  # noqa: E731
    group = lambda: "".join(rng.choice(string.ascii_uppercase + string.digits)  # noqa: E731
                            for _ in range(rng.randint(2, 7)))
    return {
        "bytes": [bytes(rng.randrange(256) for _ in range(rng.randint(20, 300))).decode("utf-8", "replace")
                  for _ in range(per_kind)],
        "words": [" ".join(word() for _ in range(rng.randint(5, 60))) for _ in range(per_kind)],
        "codes": [" ".join(group() for _ in range(rng.randint(5, 40))) for _ in range(per_kind)],
        "near_empty": ["".join(rng.choice(".-?!/#*x0—") for _ in range(rng.randint(1, 4)))
                       for _ in range(per_kind)],
    }


def _no_zone_share(results: list) -> float:
    return sum(isinstance(r, ExtractionError) or not r.defines_zone for r in results) / max(len(results), 1)


def score_negatives(model, limit: int | None = None, path: Path = NOTAMS_DEV) -> dict | None:
    """Share of texts giving no zone: the dev NOTAMs that is_negative picks (all, and those of
    them that state a position: obstacles), and garbage (all, and by kind). None when the
    NOTAM file is absent."""
    if not path.is_file():
        return None
    rows = spread([r for r in read_jsonl(path) if is_negative(r["text"])], limit)
    garbage = garbage_texts()
    texts = [r["text"] for r in rows] + [t for kind in garbage.values() for t in kind]
    results = extract_many(texts, NoFlyZone, model=model, batch_size=16)
    notams, rest = results[:len(rows)], iter(results[len(rows):])
    by_kind = {kind: [next(rest) for _ in kind_texts] for kind, kind_texts in garbage.items()}
    with_position = [r for row, r in zip(rows, notams) if _POSITION.search(item_e(row["text"]))]
    return {"n_notams": len(rows), "notams_no_zone": _no_zone_share(notams),
            "n_with_position": len(with_position), "with_position_no_zone": _no_zone_share(with_position),
            "n_garbage": sum(map(len, by_kind.values())),
            "garbage_no_zone": _no_zone_share([r for kind in by_kind.values() for r in kind]),
            "garbage_by_kind": {kind: _no_zone_share(r) for kind, r in by_kind.items()}}
