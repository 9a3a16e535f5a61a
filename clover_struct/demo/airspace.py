"""The demo run: extract every notice as a NoFlyZone in one joint decode, compare with
one token per step, build the 3D zones, write GeoJSON and the figure, check a route.

Printing and orchestration only: extraction is api.extract_many, geometry zones.py,
drawing plot.py. A record that fails extraction is listed with its reason and left out;
nothing about one record stops the demo; a record that defines no zone (area null) is
listed as such and left out of the map and the route check.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import unicodedata
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path

from . import NOTICES_PATH, kind_of, load_notices
from clover_struct.airspace.export import geojson
from clover_struct.airspace.geometry import Crossing, Volume, Waypoint, check_route, volume

JOINT_THRESHOLD = 0.9       # api.extract_many's default: commit further tokens above this confidence


def _utc(h: int, m: int) -> datetime:
    return datetime(2031, 6, 14, h, m, tzinfo=timezone.utc)


# A BVLOS powerline-inspection flight across Shanghai, Songjiang to Waigaoqiao, on Saturday
# 14 June 2031, 09:00-10:22 Beijing time: about 60 km at 45 km/h, climbing to 120 m above ground.
ROUTE = [
    Waypoint(31.030, 121.250, 30.0, _utc(1, 0)),
    Waypoint(31.095, 121.395, 120.0, _utc(1, 18)),
    Waypoint(31.165, 121.500, 120.0, _utc(1, 34)),
    Waypoint(31.230, 121.610, 120.0, _utc(1, 50)),
    Waypoint(31.300, 121.720, 120.0, _utc(2, 6)),
    Waypoint(31.385, 121.800, 120.0, _utc(2, 22)),
]


class _Counted:
    """The model, with its forward passes counted: one per prefill, denoising step or block
    commit, however many records the batch holds (a record's Trace counts the calls it was
    part of, so summing traces counts a batched call once per record)."""

    def __init__(self, model):
        self._model, self.calls = model, 0

    def __getattr__(self, name):
        return getattr(self._model, name)

    def _count(self, fn, *args, **kwargs):
        self.calls += 1
        return fn(*args, **kwargs)

    def prefill(self, *a, **k):
        return self._count(self._model.prefill, *a, **k)

    def step(self, *a, **k):
        return self._count(self._model.step, *a, **k)

    def prefill_step(self, *a, **k):
        return self._count(self._model.prefill_step, *a, **k)

    def commit(self, *a, **k):
        return self._count(self._model.commit, *a, **k)


def _load(model):
    if model is None or isinstance(model, (str, os.PathLike)):
        from clover_struct import load_model

        return load_model(None if model is None else str(model))
    return model


def _warm(model, schema) -> None:
    """Compile the canvas automata once, so the timed decodes measure decoding only."""
    from clover_struct.api import prepare
    from clover_struct.errors import CloverError

    try:
        prepare(schema, model)
    except CloverError:
        pass   # the decode reports it


def _decode(model, texts, batch_size, schedule):
    from clover_struct.api import extract_many
    from clover_struct.schemas.airspace import NoFlyZone

    counted = _Counted(model)
    t0 = time.perf_counter()
    results = extract_many(texts, NoFlyZone, model=counted, batch_size=batch_size, trace=True, schedule=schedule)
    return results, time.perf_counter() - t0, counted.calls


def _say(stream, line: str = "") -> None:
    try:
        stream.write(line + "\n")
    except UnicodeEncodeError:   # a terminal that cannot show Chinese (or a random model's output)
        stream.write(line.encode("ascii", "backslashreplace").decode("ascii") + "\n")


def _cols(text: str) -> int:
    """Terminal columns: CJK characters take two."""
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def _one_line(text: str, width: int) -> str:
    """`text` on one line, cut to `width` columns and padded to them."""
    text = " ".join(str(text).split())
    if _cols(text) > width:
        while _cols(text) > width - 1:
            text = text[:-1]
        text += "…"
    return text + " " * (width - _cols(text))


def _when(t) -> str:
    return "—" if t is None else f"{t:%Y-%m-%d %H:%M}"


def _area(v: Volume) -> str:
    z = v.zone
    if z.radius_m is not None:
        return f"circle {z.radius_m:,.0f} m @ {z.center_lat:.4f},{z.center_lon:.4f}"
    return f"polygon, {len(z.polygon)} vertices"


def _table(stream, notices, vols: dict, failed: dict, none: list) -> None:
    _say(stream, f"{'id':9} {'area':34} {'floor – ceiling':24} {'valid from → to (UTC)':35} "
                 f"{'schedule (notice clock)':33} {'UAS':4} reason")
    for n in notices:
        i = n["id"]
        if i in failed:
            _say(stream, f"{i:9} FAILED: {_one_line(failed[i], 110).rstrip()}")
            continue
        if i in none:
            _say(stream, f"{i:9} no zone")
            continue
        v = vols[i]
        valid = f"{_when(v.valid_from)} → {_when(v.valid_to) if v.valid_to else 'PERM/UFN'}"
        _say(stream, f"{i:9} {_area(v):34} {v.limits_text():24} {valid:35} {_one_line(v.zone.schedule or '—', 33)} "
                     f"{'yes' if v.zone.uas_only else 'no':4} {_one_line(v.zone.reason or '—', 40).rstrip()}")


def _route_report(stream, crossings: list[Crossing], vols: dict) -> None:
    first, last = ROUTE[0].time, ROUTE[-1].time
    _say(stream, f"route check: {len(ROUTE)} waypoints, {len(ROUTE) - 1} legs, "
                 f"{first:%Y-%m-%d %H:%M}–{last:%H:%M} UTC, heights above ground "
                 "(AMSL/STD zones: ground taken at sea level)")
    for c in crossings:
        leg = f"leg {c.leg} W{c.leg - 1}→W{c.leg}"
        if c.conflict:
            v = vols[c.zone_id]
            _say(stream, f"  {leg}  CONFLICT {c.zone_id:9} {c.conflict_from:%H:%M:%S}–{c.conflict_to:%H:%M:%S} UTC  "
                         f"{v.limits_text()}; {_one_line(v.zone.reason or '', 40).rstrip()}")
        else:
            _say(stream, f"  {leg}  clear    {c.zone_id:9} {c.enter:%H:%M:%S}–{c.leave:%H:%M:%S} UTC  {c.why}")
    hits = [c for c in crossings if c.conflict]
    legs = sorted({c.leg for c in hits})
    _say(stream, f"  {len(hits)} conflicts with the {len(vols)} zones extracted"
                 + (f", on legs {', '.join(map(str, legs))}" if legs else ""))


def run(model=None, out_dir=".", batch_size: int = 20, *, baseline: bool = False, notices_path=NOTICES_PATH,
        stream=None) -> dict:
    """Run the demo; print the report and, last, one JSON line; return that summary.

    model: None (the embedded clover-mini), a model directory, or a loaded model.
    baseline: also decode one token per step, for comparison (several times the joint
    decode's forward passes, minutes on 2 CPU cores; without it one_token_forward_passes is None).
    Writes zones.geojson and (with matplotlib) airspace.png into out_dir.
    """
    from clover_struct.errors import ExtractionError
    from clover_struct.schemas.airspace import NoFlyZone

    stream = stream or sys.stdout
    model = _load(model)
    notices = load_notices(notices_path)
    texts = [n["text"] for n in notices]
    kinds = Counter(kind_of(t) for t in texts)
    source = getattr(model, "source", type(model).__name__)
    _say(stream, f"airspace demo: {len(notices)} notices ({kinds['icao']} ICAO NOTAMs, {kinds['en']} English and "
                 f"{kinds['zh']} Chinese drone notices) -> NoFlyZone, model {source}")
    _warm(model, NoFlyZone)
    # Joint first: the one-token run then reuses the automata's cached masks, which can only
    # flatter its time, never the joint decode's.
    joint, seconds, passes = _decode(model, texts, batch_size, "joint")

    vols, failed, none = {}, {}, []
    for n, (value, _) in zip(notices, joint):
        if isinstance(value, ExtractionError):
            failed[n["id"]] = str(value)
            continue
        if not value.defines_zone:   # the model read no zone in it: nothing to draw or check
            none.append(n["id"])
            continue
        try:
            vols[n["id"]] = volume(n["id"], value)
        except ValueError as e:   # a value the schema accepts but geometry cannot use
            failed[n["id"]] = f"geometry: {e}"
    committed = sum(t.tokens_committed for _, t in joint)
    batches = -(-len(texts) // batch_size)
    _say(stream, f"joint decode (threshold {JOINT_THRESHOLD}), {batches} batch(es) of up to {batch_size}: "
                 f"{passes} forward passes, {seconds:.2f} s, {committed / max(passes, 1):.1f} tokens per forward")
    slow_passes = None
    if baseline:
        slow, slow_seconds, slow_passes = _decode(model, texts, batch_size, "one_token")
        slow_committed = sum(t.tokens_committed for _, t in slow)
        _say(stream, f"one token (or choice) per step, the most confident:  {slow_passes} forward passes, "
                     f"{slow_seconds:.2f} s, {slow_committed / max(slow_passes, 1):.1f} tokens per forward")
    else:
        _say(stream, "one token per step: not run (--baseline runs it for comparison)")
    _say(stream, f"per-record forward passes, summed over records (what decoding them one at a time "
                 f"would take): {sum(t.forward_passes for _, t in joint)}")
    _say(stream)
    _table(stream, notices, vols, failed, none)
    if none:
        _say(stream, f"\n{len(none)} of {len(notices)} notices read as defining no zone: " + ", ".join(none))
    if failed:
        _say(stream, f"\n{len(failed)} of {len(notices)} notices failed extraction and are left out: "
                     + ", ".join(failed))
    _say(stream)

    zones = list(vols.values())
    crossings = check_route(ROUTE, zones)
    _route_report(stream, crossings, vols)

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    gj = out / "zones.geojson"
    gj.write_text(json.dumps(geojson(zones), ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    written = [str(gj)]
    try:
        from .plot import figure
    except ImportError:
        _say(stream, "no figure: matplotlib is not installed (pip install 'clover-struct[demo]')")
    else:
        title = f"{len(zones)} no-fly zones extracted from {len(notices)} notices around Shanghai"
        written.append(str(figure(zones, ROUTE, crossings, out / "airspace.png", title)))
    _say(stream, "wrote " + ", ".join(written))

    summary = {"notices": len(notices), "zones": len(zones), "seconds": round(seconds, 3),
               "forward_passes": passes, "one_token_forward_passes": slow_passes}
    _say(stream, json.dumps(summary))
    return summary


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="airspace_demo", description="20 notices -> 3D no-fly zones -> "
                                "zones.geojson, airspace.png and a drone route check.")
    p.add_argument("--model", metavar="DIR", help="model directory (default: the embedded clover-mini)")
    p.add_argument("--out", default=".", metavar="DIR", help="output directory (default: .)")
    p.add_argument("--batch-size", type=int, default=20, metavar="N", help="records decoded jointly (default 20)")
    p.add_argument("--baseline", action="store_true", help="also decode one token per step, for comparison (slow)")
    args = p.parse_args(argv)
    if args.batch_size < 1:
        p.error("--batch-size must be at least 1")
    from clover_struct.errors import CloverError

    try:
        run(args.model, args.out, args.batch_size, baseline=args.baseline)
    except (CloverError, ValueError, OSError) as e:
        print(f"airspace demo: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
