"""How much of the labelled real data can the readers read from the text's own pieces?

    python benchmarks/reader_coverage.py [--data DIR] [--show N]

Reads zones-dev.jsonl and notams-dev.jsonl from ../shared/data (or --data) at run time;
nothing of them is stored in the repository. For each labelled value, the question is
whether some piece of the notice's text, read by clover_struct.schemas.readers, gives it:

zones-dev (label -> pieces tried):
  vertex, centre   every pair of adjacent coordinate_pieces (lat and lon with only blanks
                   or commas between), read by read_position; within 1e-4 degrees on both axes
  radius           number + unit pieces ('0.2NM', '1 NM RADIUS'), read_radius; within 0.01 m
  floor, ceiling   SFC/GND/UNL, FLnnn, heights with FT/M and a reference, in items F/G or
                   item E ('MAX HGT 500FT AGL'), read_limit; metres within 0.01 and the same ref
  valid_from/to    the values of items B and C, read_time; equal (PERM reads as None)
notams-dev:
  Q centre         coordinate pairs as above, against ref center_lat/center_lon
  B, C             items B and C, read_time, against ref valid_from/valid_to (ISO) or
                   valid_from_raw/valid_to_raw (YYMMDDhhmm, compared as written digits)
  F/G vs ref       items F and G, read_limit, against the reference parser's lower/upper read
                   by read_limit (only where the reference has them)
  F/G vs Q-line    items F and G against the Q-line limits, an independent cross-check: SFC/GND
                   is 000 and UNL 999, FLnnn is nnn, a height in FT AMSL is its hundreds of feet
                   rounded down for F and up for G (ICAO Doc 8126); AGL heights are skipped
                   (the Q-line needs the ground elevation)

Also lists, by shape, coordinate-like text (digits with a hemisphere letter beside them)
that no piece covers: notations left unread, or text that only looks like a coordinate.
Prints a table, the values no piece gave with the notation around them, and a final JSON
line {"zones": {...}, "notams": {...}} with labelled/covered counts and shares per value.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import re
import sys
from datetime import datetime, timezone
from pathlib import Path

from clover_struct.schemas.readers import coordinate_pieces, read_limit, read_position, read_radius, read_time

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
DEG = 1e-4
RADIUS = re.compile(r"\d[\d,.]*\s?(?:NM|KM|M|FT)\b(?:\s?RADIUS)?")
LIMIT = re.compile(r"\b(?:SFC|GND|UNL)\b|\bFL ?\d{1,3}\b"
                   r"|(?:\b(?:MAX|HGT|UP TO)\s+)*\b\d[\d,.]*\s?(?:FT|M)\b(?:\s+(?:AMSL|AGL|MSL)\b)?")
# Loosely coordinate-like: digits with a hemisphere letter on one side. Those that overlap no
# coordinate_pieces span are reported by shape, to show notations the readers leave unread.
LOOSE = re.compile(r"(?<![A-Z\d])[NSEW] ?\d[\d.]*|\d[\d.]*\d ?[NSEW](?![A-Z])")
ITEM = re.compile(r"\b([BCFG])\) ?(.*?)\s*(?=\b[A-G]\)|$)", re.MULTILINE)  # 'C)2604270345' has no blank


class Tally:
    """Labelled and covered counts per value, and what was missed."""

    def __init__(self):
        self.counts: dict[str, list[int]] = {}
        self.missed: dict[str, list[str]] = {}
        self.unread: dict[str, list[str]] = {}  # shape of a coordinate-like text no piece covers -> ids

    def look_for_unread(self, rid: str, text: str) -> None:
        spans = coordinate_pieces(text)
        for m in LOOSE.finditer(text):
            if not any(a < m.end() and m.start() < b for a, b in spans):
                self.unread.setdefault(re.sub(r"\d", "d", m[0]), []).append(rid)

    def add(self, name: str, covered: bool, note: str) -> None:
        c = self.counts.setdefault(name, [0, 0])
        c[0] += 1
        c[1] += covered
        if not covered:
            self.missed.setdefault(name, []).append(note)

    def summary(self) -> dict:
        return {k: {"labelled": n, "covered": k_, "share": round(k_ / n, 4)} for k, (n, k_) in self.counts.items()}


def rows(path: Path) -> list[dict]:
    with path.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def positions(text: str) -> list[tuple[float, float]]:
    """Every adjacent pair of coordinate pieces that reads as a position."""
    spans, found = coordinate_pieces(text), []
    for (a, b), (c, d) in itertools.pairwise(spans):
        if re.fullmatch(r"[\s,;/]*", text[b:c]):
            try:
                found.append(read_position(text[a:d]))
            except ValueError:
                pass
    return found


def read_all(pieces, reader) -> list:
    """What reader makes of each piece that it reads (unreadable pieces are dropped)."""
    out = []
    for piece in pieces:
        try:
            out.append(reader(piece))
        except ValueError:
            pass
    return out


def matches(pattern: re.Pattern, text: str) -> list[str]:
    return [m[0] for m in pattern.finditer(text)]


def items(text: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for m in ITEM.finditer(text):
        out.setdefault(m[1], []).append(m[2])
    return out


def near(a, b, tol: float) -> bool:
    return (a is None and b is None) or (a is not None and b is not None and abs(a - b) <= tol)


def context(text: str, pattern: str) -> str:
    m = re.search(pattern, text)
    return repr(text[max(0, m.start() - 30) : m.end() + 30]) if m else ""


def zones(path: Path, tally: Tally) -> None:
    for row in rows(path):
        text, z, rid = row["text"], row["zone"], row["id"]
        tally.look_for_unread(rid, text)
        got = positions(text)
        targets = z["polygon"] or [[z["center_lat"], z["center_lon"]]]
        for lat, lon in targets:
            hit = any(near(lat, a, DEG) and near(lon, b, DEG) for a, b in got)
            tally.add("vertex" if z["polygon"] else "centre", hit, f"{rid} ({lat}, {lon}) [{z['label_notes'][:60]}]")
        if z["radius_m"] is not None:
            hit = any(near(z["radius_m"], r, 0.01) for r in read_all(matches(RADIUS, text), read_radius))
            tally.add("radius", hit, f"{rid} {z['radius_m']} m {context(text, 'RADIUS')}")
        limits = read_all(matches(LIMIT, text), read_limit)
        for side in ("floor", "ceiling"):
            want = (z[f"{side}_m"], z[f"{side}_ref"])
            hit = any(near(want[0], m, 0.01) and want[1] == r for m, r in limits)
            tally.add(side, hit, f"{rid} {want} [{z['label_notes'][-70:]}]")
        found = items(text)
        for side, item in (("valid_from", "B"), ("valid_to", "C")):
            want = None if z[side] is None else datetime.fromisoformat(z[side].replace("Z", "+00:00"))
            hit = any(t == want for t in read_all(found.get(item, []), read_time))
            tally.add(side, hit, f"{rid} {z[side]} {item}) {found.get(item)}")


def notams(path: Path, tally: Tally) -> None:
    for row in rows(path):
        text, ref, rid = row["text"], row["ref"], row["id"]
        tally.look_for_unread(rid, text)
        found = items(text)
        if ref.get("center_lat") is not None:
            hit = any(near(ref["center_lat"], a, DEG) and near(ref["center_lon"], b, DEG) for a, b in positions(text))
            q_line = context(text, r"Q\)[^\n]*")
            tally.add("q_centre", hit, f"{rid} ({ref['center_lat']}, {ref['center_lon']}) {q_line}")
        for side, item in (("from", "B"), ("to", "C")):
            iso, raw = ref.get(f"valid_{side}"), ref.get(f"valid_{side}_raw")
            if iso is None and raw is None:
                continue
            values = read_all(found.get(item, []), read_time)
            if raw is not None:  # YYMMDDhhmm or PERM, as the bulletin writes it
                hit = any((v.strftime("%y%m%d%H%M") if v else "PERM") == raw for v in values)
            else:
                want = None if iso == "PERM" else datetime.fromisoformat(iso).astimezone(timezone.utc)
                hit = any(v == want for v in values)
            tally.add(f"item_{item}", hit, f"{rid} {iso or raw} {item}) {found.get(item)}")
        for item, name, q in (("F", "lower", "lower_fl"), ("G", "upper", "upper_fl")):
            pieces = found.get(item, [])
            if ref.get(name):
                want = read_limit(ref[name])
                hit = any(_reads(p) == want for p in pieces)
                tally.add(f"item_{item}_vs_ref", hit, f"{rid} {ref[name]!r} {item}) {pieces}")
            if pieces and ref.get(q) is not None:
                verdict = _q_agrees(pieces[0], ref[q], item)
                if verdict is not None:
                    tally.add(f"item_{item}_vs_qline", verdict, f"{rid} {item}) {pieces[0]!r} Q {ref[q]:03d}")


def _reads(piece: str):
    try:
        return read_limit(piece)
    except ValueError:
        return "unread"


def _q_agrees(piece: str, q: int, item: str) -> bool | None:
    """Does item F/G agree with the Q-line's limit (hundreds of feet)? None where not comparable."""
    reading = _reads(piece)
    if reading == "unread":
        return False
    metres, ref = reading
    if metres is None:
        return q == 999
    if ref == "AGL" and metres:
        return None
    hundreds = metres / 0.3048 / 100
    rounded = math.floor(hundreds + 1e-9) if item == "F" else math.ceil(hundreds - 1e-9)
    return rounded == q


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", type=Path, default=DATA,
                   help=f"folder with zones-dev.jsonl and notams-dev.jsonl (default {DATA})")
    p.add_argument("--show", type=int, default=8, help="missed values to list per row")
    args = p.parse_args(argv)
    result = {}
    for name, fn in (("zones", zones), ("notams", notams)):
        path = args.data / f"{name}-dev.jsonl"
        if not path.is_file():
            print(f"{path} not present; skipped", file=sys.stderr)
            continue
        tally = Tally()
        fn(path, tally)
        result[name] = tally.summary()
        print(f"\n{path.name}\n{'value':22} {'labelled':>8} {'covered':>8} {'share':>7}")
        for key, (n, k) in tally.counts.items():
            print(f"{key:22} {n:8d} {k:8d} {k / n:7.1%}")
        for key, notes in tally.missed.items():
            print(f"  missed {key} ({len(notes)}):")
            for note in notes[: args.show]:
                print(f"    {note}")
        for shape, ids in sorted(tally.unread.items(), key=lambda kv: -len(kv[1])):
            print(f"  coordinate-like but unread: {shape!r} x{len(ids)} (e.g. {ids[0]})")
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    main()
