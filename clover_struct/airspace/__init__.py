"""The airspace and dispatch domain, above the API: what the notices' zones mean for a flight.

geometry  zones as 3D volumes (shapely), a route checked against them, a flight's geometric
          facts (`route_facts`), which `decide` takes as known values
flight    `judge_flight`: a flight request judged against notices, geometry by code and the
          rest by the model; the judgment prompt and the delay policy
export    zones as GeoJSON, and as ED-318 UAS geographical zones (`ed318`)

    from clover_struct.airspace import judge_flight, route_facts, geojson, ed318

The names load their module on first use (PEP 562).
"""

from importlib import import_module

_NAMES = {"Volume": "geometry", "volume": "geometry", "volumes": "geometry", "Waypoint": "geometry",
          "Crossing": "geometry", "check_route": "geometry", "passages": "geometry", "route_facts": "geometry",
          "facts_of": "geometry", "judge_flight": "flight", "judgment_text": "flight", "QUESTIONS": "flight",
          "ends_soon": "flight", "geojson": "export", "ed318": "export"}

__all__ = sorted(_NAMES)


def __getattr__(name: str):
    if name not in _NAMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f".{_NAMES[name]}", __name__), name)


def __dir__():
    return __all__
