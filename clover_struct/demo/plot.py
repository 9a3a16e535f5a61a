"""The demo figure: a 2D map of zone footprints and a 3D view of the extruded volumes,
both with the drone route and its conflicts.

matplotlib is optional (the `demo` extra) and imported only here, through Figure and
the Agg canvas, so no pyplot state or GUI backend is touched. Knows nothing of models.
"""

from __future__ import annotations

import math
from pathlib import Path

from shapely.geometry import Polygon, box

from clover_struct.airspace.geometry import BANDS, Crossing, Volume, Waypoint, inside, samples

CAP_M = 1000.0          # 3D tops: higher or unlimited ceilings are cut here (dotted top edge)
FAR_DEG = 0.5           # the map grows to hold zones within this of the route's box; larger ones are cut
MARGIN = 0.07           # of the map's extent on each side: room for the waypoint labels
COLOURS = ("#a1dab4", "#41b6c4", "#2c7fb8", "#253494")   # one per BANDS entry, low to high
CONFLICT = "#d7191c"


def _short(v: Volume) -> str:
    if v.ceiling_m is None:
        return f"{v.floor_m:.0f} m–UNL"
    return f"{v.floor_m:.0f}–{v.ceiling_m:.0f} m"


def _conflict_points(route: list[Waypoint], vols: list[Volume], crossings: list[Crossing]) -> list[list[Waypoint]]:
    """Runs of consecutive route samples inside a volume they conflict with."""
    by_id = {v.id: v for v in vols}
    runs = []
    for c in crossings:
        if not c.conflict:
            continue
        v, run = by_id[c.zone_id], []
        for p in samples(route[c.leg - 1], route[c.leg]):
            if inside(v, p.lat, p.lon, p.alt_m, p.time):
                run.append(p)
            elif run:
                runs.append(run)
                run = []
        if run:
            runs.append(run)
    return runs


def frame(vols: list[Volume], route: list[Waypoint]) -> tuple[float, float, float, float]:
    """The map's extent (lon0, lat0, lon1, lat1): the route's box grown to hold every zone that
    lies within FAR_DEG of it, plus a margin. A zone reaching farther (say one extracted with
    the wrong unit, hundreds of km wide) is cut at the map's edge instead of shrinking the rest."""
    x0, y0 = min(w.lon for w in route), min(w.lat for w in route)
    x1, y1 = max(w.lon for w in route), max(w.lat for w in route)
    reach = box(x0 - FAR_DEG, y0 - FAR_DEG, x1 + FAR_DEG, y1 + FAR_DEG)
    for v in vols:
        if reach.contains(v.footprint):
            a, b, c, d = v.footprint.bounds
            x0, y0, x1, y1 = min(x0, a), min(y0, b), max(x1, c), max(y1, d)
    dx, dy = MARGIN * (x1 - x0), MARGIN * (y1 - y0)
    return x0 - dx, y0 - dy, x1 + dx, y1 + dy


def _visible(v: Volume, extent) -> list[Polygon]:
    """The pieces of v's footprint inside the map (all of it, for most zones)."""
    part = v.footprint.intersection(box(*extent))
    return [p for p in getattr(part, "geoms", [part]) if isinstance(p, Polygon) and not p.is_empty]


def _active(v: Volume, route: list[Waypoint]) -> bool:
    return v.active_during(route[0].time, route[-1].time)


def _map(ax, vols, route, runs, active, pieces, whole):
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch
    from matplotlib.patches import Polygon as PolygonPatch

    for v in vols:
        on = active[v.id]
        for piece in pieces[v.id]:
            xy = list(piece.exterior.coords)
            ax.add_patch(PolygonPatch(xy, closed=True, facecolor=COLOURS[v.band], alpha=0.45 if on else 0.15,
                                      edgecolor="none", hatch="///" if v.floor_m > 0 else None))
            ax.add_patch(PolygonPatch(xy, closed=True, fill=False, edgecolor=COLOURS[v.band] if on else "0.45",
                                      linewidth=1.4, linestyle="-" if on else "--"))
        if v.id not in whole:   # cut at the map's edge: named in the title instead
            continue
        # Labels sit on the north edge, clear of the route that crosses the middle.
        x, top = v.footprint.centroid.x, v.footprint.bounds[3]
        ax.annotate(f"{v.id}  {_short(v)}", (x, top), textcoords="offset points", xytext=(0, 2), ha="center",
                    va="bottom", fontsize=7.5, bbox=dict(boxstyle="round,pad=0.1", facecolor="white", alpha=0.6,
                                                         linewidth=0), zorder=4)   # under the route
    lon, lat = [w.lon for w in route], [w.lat for w in route]
    ax.plot(lon, lat, "-", color="black", linewidth=1.8, zorder=5)
    ax.plot(lon, lat, "o", color="black", markersize=5, zorder=6)
    for k, w in enumerate(route):
        ax.annotate(f"W{k} {w.time:%H:%M}Z, {w.alt_m:.0f} m", (w.lon, w.lat), textcoords="offset points",
                    xytext=(7, -3), ha="left", va="top", fontsize=7.5, fontweight="bold", zorder=7,
                    bbox=dict(boxstyle="round,pad=0.1", facecolor="white", alpha=0.6, linewidth=0))
    for run in runs:
        ax.plot([p.lon for p in run], [p.lat for p in run], "-", color=CONFLICT, linewidth=4, zorder=5.5)
    ax.set_aspect(1 / math.cos(math.radians(sum(lat) / len(lat))))   # equal ground distances
    ax.set_xlabel("longitude (° E)")
    ax.set_ylabel("latitude (° N)")
    ax.grid(True, linewidth=0.3, alpha=0.5)
    handles = [Patch(facecolor=c, alpha=0.6, label=label) for c, (_, label) in zip(COLOURS, BANDS)]
    handles += [Patch(facecolor="white", edgecolor="0.45", linestyle="--", label="not active during the flight"),
                Patch(facecolor="white", edgecolor="0.3", hatch="///", label="floor above ground"),
                Line2D([], [], color="black", marker="o", label="drone route (waypoint, time, height)"),
                Line2D([], [], color=CONFLICT, linewidth=4, label="conflict: route inside an active zone")]
    return handles


def _prism(v: Volume, piece: Polygon):
    """Faces of a piece of v's footprint extruded from floor to ceiling (cut at CAP_M): walls, bottom, top."""
    ring = list(piece.exterior.coords)
    lo, hi = min(v.floor_m, CAP_M), min(CAP_M if v.ceiling_m is None else v.ceiling_m, CAP_M)
    walls = [[(x0, y0, lo), (x1, y1, lo), (x1, y1, hi), (x0, y0, hi)] for (x0, y0), (x1, y1) in zip(ring, ring[1:])]
    return walls, [(x, y, lo) for x, y in ring], [(x, y, hi) for x, y in ring], hi


def _view3d(ax, vols, route, runs, active, pieces, whole):
    from mpl_toolkits.mplot3d.art3d import Poly3DCollection

    for v in vols:
        on, colour = active[v.id], COLOURS[v.band]
        cut = v.ceiling_m is None or v.ceiling_m > CAP_M
        for piece in pieces[v.id]:
            walls, bottom, top, hi = _prism(v, piece)
            ax.add_collection3d(Poly3DCollection(walls, facecolor=colour, alpha=0.18 if on else 0.06,
                                                 edgecolor="none"))
            ax.add_collection3d(Poly3DCollection([bottom, top], facecolor=colour, alpha=0.35 if on else 0.1,
                                                 edgecolor=colour if on else "0.5", linewidth=0.8))
            if cut:
                ax.plot(*zip(*top), color="0.2", linestyle=":", linewidth=1)
            if v.floor_m > 0:   # its shadow on the ground, so a raised volume can be placed
                ax.plot(*zip(*[(x, y, 0) for x, y, _ in bottom]), color=colour, linestyle="--", linewidth=0.8)
        if v.id in whole:
            c = v.footprint.representative_point()
            ax.text(c.x, c.y, hi + 40, v.id + (" (cut)" if cut else ""), fontsize=6.5, ha="center")
    ax.plot([w.lon for w in route], [w.lat for w in route], [w.alt_m for w in route], "-o", color="black",
            linewidth=1.8, markersize=3.5, zorder=10)
    for k, w in enumerate(route):
        ax.plot([w.lon, w.lon], [w.lat, w.lat], [0, w.alt_m], ":", color="0.3", linewidth=0.8)
        ax.text(w.lon, w.lat, w.alt_m + 60, f"W{k}", fontsize=7, fontweight="bold")
    for run in runs:
        ax.plot([p.lon for p in run], [p.lat for p in run], [p.alt_m for p in run], color=CONFLICT,
                linewidth=3.5, zorder=11)
    ax.set_xlabel("longitude (° E)", labelpad=8)
    ax.set_ylabel("latitude (° N)", labelpad=8)
    ax.set_zlabel("altitude (m; AGL = AMSL here)", labelpad=6)
    ax.set_zlim(0, CAP_M)
    ax.view_init(elev=24, azim=-62)


def figure(vols: list[Volume], route: list[Waypoint], crossings: list[Crossing], path: str | Path,
           title: str = "") -> Path:
    """Write the two-panel figure to `path` (PNG) and return the path."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    extent = frame(vols, route)
    pieces = {v.id: _visible(v, extent) for v in vols}
    whole = {v.id for v in vols if box(*extent).contains(v.footprint)}
    shown = [v for v in vols if pieces[v.id]]
    left_off = [v.id for v in vols if v not in shown]
    active = {v.id: _active(v, route) for v in shown}
    runs = _conflict_points(route, shown, crossings)

    fig = Figure(figsize=(18, 9.5), dpi=110)
    fig.subplots_adjust(left=0.05, right=0.96, bottom=0.12, top=0.92, wspace=0.06)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 2, 1)
    ax3 = fig.add_subplot(1, 2, 2, projection="3d", computed_zorder=False)   # route drawn over volumes
    handles = _map(ax, shown, route, runs, active, pieces, whole)
    fig.legend(handles=handles, loc="lower center", ncol=4, fontsize=9, bbox_to_anchor=(0.5, 0.005))
    ax.set_title("Footprints (labels: id, floor–ceiling)", fontsize=11)
    _view3d(ax3, shown, route, runs, active, pieces, whole)
    x0, y0, x1, y1 = extent
    ax.set_xlim(x0, x1)
    ax.set_ylim(y0, y1)
    ax3.set_xlim(x0, x1)
    ax3.set_ylim(y0, y1)
    ground_km = ((x1 - x0) * 111.32 * math.cos(math.radians((y0 + y1) / 2)), (y1 - y0) * 111.32)
    ax3.set_box_aspect((ground_km[0], ground_km[1], 0.4 * max(ground_km)))
    ax3.set_title(f"Volumes (extruded floor to ceiling; tops above {CAP_M:.0f} m cut, dotted)", fontsize=11)
    flight = f"flight {route[0].time:%Y-%m-%d %H:%M}–{route[-1].time:%H:%M} UTC"
    edge = [v.id for v in shown if v.id not in whole]
    note = f"  ·  cut at the map's edge: {', '.join(edge)}" if edge else ""
    note += f"  ·  not drawn (far from the route): {', '.join(left_off)}" if left_off else ""
    fig.suptitle((title or "No-fly zones and a drone route") + f"  ·  {flight}{note}", fontsize=13)
    path = Path(path)
    fig.savefig(path)
    return path
