"""Dispatch demo: a compound dispatch message into its tasks, then linked questions about a flight.

    python examples/dispatch_demo.py [--model DIR]

1. The dispatch message is extracted as a DispatchMessage: up to 8 typed tasks.
2. A flight request beside a notice: the notice is extracted as a NoFlyZone, and
   what geometry answers better than a model (does the route enter the zone, at
   an altitude and a time inside its limits) is computed with shapely
   (clover_struct.airspace.geometry.route_facts) and given as known facts; the model decides the rest
   (authorisation, can it start, must the route change, the action) jointly, never against
   the rules (clover_struct.airspace.flight.judge_flight). When the notice cannot be extracted,
   the run says so and the model decides every answer.
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys

from clover_struct import CloverError, ExtractionError, extract, load_model
from clover_struct.airspace.flight import judge_flight
from clover_struct.airspace.geometry import route_facts
from clover_struct.schemas import DispatchMessage, NoFlyZone

MESSAGE = ("DISPATCH 0815Z FROM OPS-PUDONG. UAV-12 ASSIGNED MEDICAL MISSION TO RENJI HOSPITAL, URGENT. "
           "UAV-12 WP3 MOVED TO 31.21040 121.46270. ZONE R-118 LIFTED EFFECTIVE 0900Z. "
           "DR-7 CHANGE ALTITUDE TO 90M. END")
NOTICE = ("Notice to drone operators\n\nFor a public event, drones may not fly within 800 m of "
          "31.2150, 121.4700 below 120 M AGL, from 12 MAY 2027 0800 UTC until 12 MAY 2027 1800 UTC. "
          "Flights require prior permission from the Huangpu district police.")
ROUTE = [(31.2050, 121.4550), (31.2140, 121.4690), (31.2230, 121.4810)]   # (lat, lon)
ALTITUDE_M = 100.0                                                          # AGL
WINDOW = (dt.datetime(2027, 5, 12, 9, 0, tzinfo=dt.timezone.utc), dt.datetime(2027, 5, 12, 9, 40, tzinfo=dt.timezone.utc))


def request() -> str:
    """The flight request in the layout the judgment examples use."""
    route = " -> ".join(f"{lat:.4f}, {lon:.4f}" for lat, lon in ROUTE)
    fmt = "%Y-%m-%d %H:%M"
    return (f"FLIGHT REQUEST MED-12\nAircraft: UAV-12 (unmanned)\nRoute: {route}\nHeight: {ALTITUDE_M:.0f} m AGL\n"
            f"Window: {WINDOW[0]:{fmt}} to {WINDOW[1]:{fmt}} UTC")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", metavar="DIR", help="model directory (default: the embedded clover-mini)")
    args = ap.parse_args(argv)
    try:
        model = load_model(args.model)
        message = extract(MESSAGE, DispatchMessage, model=model)
        print(f"dispatch from {message.sender} at {message.issued_utc}:")
        for n, task in enumerate(message.tasks, 1):
            print(f"  {n}. {task.kind}: {task.model_dump(exclude={'kind'}, mode='json')}")
        try:
            zone = extract(NOTICE, NoFlyZone, model=model)
        except ExtractionError as e:   # no zone, no geometry: the model decides every answer
            zone = e
            print(f"zone: not extracted ({e}); every answer is the model's")
        else:
            if not zone.defines_zone:
                print("zone: the notice was read as defining no zone")
            print(f"zone: {zone.radius_m} m around ({zone.center_lat}, {zone.center_lon}), "
                  f"{zone.floor_m}-{zone.ceiling_m} m, {zone.valid_from} to {zone.valid_to}; from geometry: "
                  f"{route_facts(ROUTE, ALTITUDE_M, *WINDOW, [zone])}")
        answers = judge_flight(request(), [NOTICE], [zone], ROUTE, ALTITUDE_M, *WINDOW, model=model)
    except CloverError as e:
        print(f"dispatch demo: {e}", file=sys.stderr)
        return 2
    for name, value in answers.model_dump(mode="json").items():
        print(f"  {name:22} {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
