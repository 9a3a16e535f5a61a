"""Scores a model: field and record exact match on generated and real notices.

    python training/evaluate.py [--model DIR] [--n 500] [--quick] [--sets dispatch,judgments]

Generated sets use evaluation seeds (training draws from 1_000_000 up); the
held-out family is a layout the model never saw in training. `real_dev` runs
Notam over ../shared/data/notams-dev.jsonl when present, on the fields its
reference has. Values are compared normalised: coordinates within 1e-3
degrees, datetimes equal, strings after whitespace folding. The last line is
JSON: {"synthetic": {"field_em", "record_em"}, "heldout_family": {...},
"real_dev": {"valid_rate", "field_em", "qline_location_validity_em"},
"dispatch": {...}, "judgments": {"accuracy", "violations", "alone_accuracy",
"alone_violations", ..., "model_only": {...}}}. Judgments are scored as the library decides
them, clover_struct.airspace.flight.judge_flight (examples/dispatch_demo.py does the same): the
model extracts each notice's zone, code computes the geometric answers from those zones (does
the route enter a zone, within its limits, while in force) and gives them as known facts, and
the model decides the rest from the notices geometry cannot rule out. alone: each open question
answered on its own, no rules. model_only: the model answering all eight questions from the
text, geometry included, which the schemas' rule (arithmetic is code's) does not ask of it.

`real_zones` and `negatives` score NoFlyZone on real text (training/zone_eval.py has the
rules): over ../shared/data/zones-dev.jsonl, "real_zones": {"valid_rate", "iou90" (share of
notices whose footprint reaches IoU 0.9 with the labelled zone), "iou_mean", "floor",
"ceiling", "valid_from", "valid_to", "uas_only", "field_em" (their mean), "by_shape",
"errors", "confidence" (the record confidence that best splits right records from wrong)};
over the dev NOTAMs that define no zone and seeded garbage text, "negatives":
{"notams_no_zone", "with_position_no_zone", "garbage_no_zone", "garbage_by_kind", counts}.
Both take at most --n notices (spread over the file; 20 with --quick) and are skipped, with a
line on stderr, when their file is absent. `handwritten` (training/handwritten.py): notices of
the kinds the other sets lack, each with what it got wrong; `fresh` and `unseen`: notices
worded as no generated notice is (handwritten.py says how each was kept apart from the generator).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
import time
from enum import Enum
from pathlib import Path

from clover_struct import ExtractionError, decide, extract_many, load_model, predicate
from clover_struct.airspace.flight import judge_flight
from clover_struct.airspace.geometry import route_facts
from clover_struct.schemas import DispatchJudgments, DispatchMessage, NoFlyZone, Notam, judgment_rules_hold

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from training.generate import HELDOUT_FAMILY, examples, judgment_cases  # noqa: E402
from training.handwritten import NEW, SETS as HANDWRITTEN, score_handwritten, set_aside  # noqa: E402
from training.zone_eval import (FIELDS, NOTAMS_DEV, ZONES_DEV, read_jsonl, score_negatives,  # noqa: E402
                                score_real_zones)

EVAL_SEED = 20_261_129
REAL_DEV = NOTAMS_DEV   # the real dev NOTAMs real_dev scores (benchmarks/compare.py reads them too)
NOTAM_FIELDS = ("notam_id", "fir", "qcode", "traffic", "purpose", "scope", "lower_fl", "upper_fl",
                "center_lat", "center_lon", "radius_nm", "location", "valid_from", "valid_to",
                "permanent", "estimated", "schedule", "lower", "upper")
QLINE_LOCATION_VALIDITY = ("fir", "qcode", "traffic", "purpose", "scope", "lower_fl", "upper_fl",
                           "center_lat", "center_lon", "radius_nm", "location", "valid_from", "valid_to")
ZONE_FIELDS = ("center_lat", "center_lon", "radius_m", "polygon", "floor_m", "ceiling_m", "floor_ref",
               "ceiling_ref", "valid_from", "valid_to", "schedule", "uas_only", "reason")


def norm(v):
    if isinstance(v, Enum):
        return norm(v.value)
    if isinstance(v, str):
        return " ".join(v.split()) or None
    if isinstance(v, (list, tuple)):
        return [norm(x) for x in v]
    if isinstance(v, dt.datetime) and v.tzinfo is None:
        return v.replace(tzinfo=dt.timezone.utc)
    return v


def same(a, b) -> bool:
    a, b = norm(a), norm(b)
    if isinstance(a, float) or isinstance(b, float):
        return a is not None and b is not None and abs(float(a) - float(b)) <= 1e-3
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return a == b


def leaves(data, prefix=""):
    """Flatten JSON data to {path: value}."""
    if isinstance(data, dict):
        return {k: v for key, sub in data.items() for k, v in leaves(sub, f"{prefix}{key}.").items()}
    if isinstance(data, list):
        return {k: v for i, sub in enumerate(data) for k, v in leaves(sub, f"{prefix}{i}.").items()}
    return {prefix.rstrip("."): data}


def fields_of(obj, names=None) -> dict:
    if names:
        return {n: getattr(obj, n) for n in names}
    return leaves(obj.model_dump(mode="json"))


def score(pairs, schema, model, names=None, batch_size=16) -> dict:
    texts, golds = [t for t, _ in pairs], [g for _, g in pairs]
    started = time.perf_counter()
    preds = extract_many(texts, schema, model=model, batch_size=batch_size)
    hits = total = records = valid = 0
    per_field = {k: 0 for k in names or ()}
    for gold, pred in zip(golds, preds):
        want = fields_of(gold, names)
        failed = isinstance(pred, ExtractionError)  # a failed record matches no field
        got = {} if failed else fields_of(pred, names)
        valid += not failed
        ok = {k: not failed and same(got.get(k), v) for k, v in want.items()}
        hits, total, records = hits + sum(ok.values()), total + len(ok), records + all(ok.values())
        for k in per_field:
            per_field[k] += ok[k]
    n = len(pairs)
    return {"n": n, "valid_rate": valid / n, "field_em": hits / max(total, 1), "record_em": records / n,
            "seconds_per_record": (time.perf_counter() - started) / n,
            **({"per_field": {k: v / n for k, v in per_field.items()}} if names else {})}


def real_reference(ref: dict) -> dict:
    """The dev set's reference values in the Notam's terms (PERM -> permanent, '' -> None)."""
    out = {k: (None if v == "" else v) for k, v in ref.items() if k in NOTAM_FIELDS and v is not None}
    if ref.get("valid_to") == "PERM":
        out["valid_to"], out["permanent"] = None, True
    for key in ("valid_from", "valid_to"):
        if isinstance(out.get(key), str):
            out[key] = dt.datetime.fromisoformat(out[key])
    return out


def same_id(a, b) -> bool:  # bulletin references drop leading zeros: N0556/26 vs N556/26
    strip = lambda s: s and s[0] + s[1:].lstrip("0")  # noqa: E731
    return strip(norm(a) or "") == strip(norm(b) or "")


def score_real(model, limit=None) -> dict | None:
    if not NOTAMS_DEV.is_file():
        return None
    rows = read_jsonl(NOTAMS_DEV)[:limit]
    preds = extract_many([r["text"] for r in rows], Notam, model=model, batch_size=16)
    hits = total = sub_hits = sub_total = 0
    for row, pred in zip(rows, preds):
        for key, want in real_reference(row["ref"]).items():
            if isinstance(pred, ExtractionError):
                ok = False
            else:
                got = getattr(pred, key)
                ok = same_id(got, want) if key == "notam_id" else same(got, want)
            hits, total = hits + ok, total + 1
            if key in QLINE_LOCATION_VALIDITY:
                sub_hits, sub_total = sub_hits + ok, sub_total + 1
    valid = sum(not isinstance(p, ExtractionError) for p in preds)
    return {"n": len(rows), "valid_rate": valid / len(rows), "field_em": hits / max(total, 1),
            "qline_location_validity_em": sub_hits / max(sub_total, 1)}


def score_judgments(cases, model) -> dict:
    """Accuracy over all answers, and rule violations, as judge_flight decides them from the
    zones the model extracts (jointly and each open question alone), and from the gold zones
    (accuracy_true_geometry: what is left when the zones are right); model_only: the model
    answering every question from the text, jointly and alone."""
    rules = [predicate(judgment_rules_hold)]
    flat = [notice for c in cases for notice in c.notices]
    extracted = iter(extract_many(flat, NoFlyZone, model=model, batch_size=16))
    count = {k: 0 for k in ("hits", "alone_hits", "true_geo_hits", "text_hits", "text_alone_hits", "fact_hits", "facts",
                            "total", "violations", "alone_violations", "text_violations", "text_alone_violations",
                            "failed_notices")}
    for c in cases:
        zones = [next(extracted) for _ in c.notices]
        good = [z for z in zones if not isinstance(z, ExtractionError)]
        count["failed_notices"] += len(zones) - len(good)
        flight = (c.route, c.height_m, c.start, c.end)
        joint, true_geo, text = (_or_none(fn) for fn in (
            lambda: judge_flight(c.request, c.notices, zones, *flight, model=model),
            lambda: judge_flight(c.request, c.notices, c.zones, *flight, model=model),
            lambda: decide(c.text, DispatchJudgments, model=model, rules=rules)))
        alone = judge_flight(c.request, c.notices, zones, *flight, model=model, joint=False)
        text_alone = decide(c.text, DispatchJudgments, model=model, joint=False)
        count["violations"] += joint is None or not judgment_rules_hold(joint)
        count["alone_violations"] += not judgment_rules_hold(alone)
        count["text_violations"] += text is None or not judgment_rules_hold(text)
        count["text_alone_violations"] += not judgment_rules_hold(text_alone)
        for k, v in c.gold.model_dump().items():
            for name, answer in (("hits", joint), ("alone_hits", alone), ("true_geo_hits", true_geo),
                                 ("text_hits", text), ("text_alone_hits", text_alone)):
                count[name] += answer is not None and getattr(answer, k) == v
            count["total"] += 1
        facts = route_facts(*flight, good)
        count["fact_hits"] += sum(v == getattr(c.gold, k) for k, v in facts.items())
        count["facts"] += len(facts)
    total = max(count["total"], 1)
    return {"n": len(cases), "accuracy": count["hits"] / total, "violations": count["violations"],
            "alone_accuracy": count["alone_hits"] / total, "alone_violations": count["alone_violations"],
            "facts_accuracy": count["fact_hits"] / max(count["facts"], 1),
            "notices": len(flat), "failed_notices": count["failed_notices"],
            "accuracy_true_geometry": count["true_geo_hits"] / total,
            "model_only": {"accuracy": count["text_hits"] / total, "violations": count["text_violations"],
                           "alone_accuracy": count["text_alone_hits"] / total,
                           "alone_violations": count["text_alone_violations"]}}


def _or_skip(name, path, scorer, model, limit):
    """A real-text set's scores, or None with a line on stderr when its file is absent."""
    result = scorer(model, limit=limit, path=path)
    if result is None:
        print(f"{name}: skipped, {path} not found", file=sys.stderr)
    return result


def _or_none(decision):
    try:
        return decision()
    except ExtractionError:
        return None


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", metavar="DIR", help="model directory (default: the embedded clover-mini)")
    ap.add_argument("--n", type=int, default=500,
                    help="generated notices in-distribution; at most this many real zones and negatives (default 500)")
    ap.add_argument("--quick", action="store_true", help="20 of each, for a smoke run")
    ap.add_argument("--sets", metavar="A,B", help="only these sets (default: all; the model card needs all)")
    ap.add_argument("--out", metavar="FILE", help="also write the final JSON line here (the model card reads it)")
    args = ap.parse_args(argv)
    model = load_model(args.model)
    n = 20 if args.quick else args.n
    m = 20 if args.quick else 200
    sets = {
        "synthetic": lambda: score(examples("notam", n, EVAL_SEED), Notam, model, NOTAM_FIELDS),
        "heldout_family": lambda: score(examples("notam", m, EVAL_SEED + 1, families=[HELDOUT_FAMILY]), Notam,
                                        model, NOTAM_FIELDS),
        "zones": lambda: score(examples("zone", m, EVAL_SEED + 2), NoFlyZone, model, ZONE_FIELDS),
        "real_dev": lambda: score_real(model, limit=20 if args.quick else None),
        "dispatch": lambda: score(examples("dispatch", m, EVAL_SEED + 3), DispatchMessage, model),
        "judgments": lambda: score_judgments(judgment_cases(m, EVAL_SEED + 4), model),
        "real_zones": lambda: _or_skip("real_zones", ZONES_DEV, score_real_zones, model, n),
        "negatives": lambda: _or_skip("negatives", NOTAMS_DEV, score_negatives, model, n),
        **{name: (lambda notices=notices: score_handwritten(model, notices)) for name, notices in HANDWRITTEN.items()},
    }
    only = args.sets.split(",") if args.sets else list(sets)
    if unknown := set(only) - set(sets):
        raise SystemExit(f"--sets: unknown {', '.join(sorted(unknown))}; the sets are {', '.join(sets)}")
    report = {name: run() for name, run in sets.items() if name in only}
    print("| set | n | valid | field EM | record EM |\n|---|---|---|---|---|")
    for name, r in report.items():
        if r and "field_em" in r and name != "real_zones":
            print(f"| {name} | {r['n']} | {r['valid_rate']:.3f} | {r['field_em']:.3f} | {r.get('record_em', float('nan')):.3f} |")
    if j := report.get("judgments"):
        t = j["model_only"]
        print(f"judgments (judge_flight, geometry from the extracted zones): accuracy {j['accuracy']:.3f} joint, "
              f"{j['alone_accuracy']:.3f} alone; rule violations {j['violations']} joint, {j['alone_violations']} "
              f"alone, of {j['n']}; facts right {j['facts_accuracy']:.3f}; {j['failed_notices']} of {j['notices']} "
              f"notices failed; with the true zones' geometry {j['accuracy_true_geometry']:.3f}")
        print(f"judgments, the model alone from the text: accuracy {t['accuracy']:.3f} joint, "
              f"{t['alone_accuracy']:.3f} alone; rule violations {t['violations']} joint, {t['alone_violations']} alone")
    if z := report.get("real_zones"):
        shapes = ", ".join(f"{s} {v['valid_rate']:.3f} valid, {v['iou90']:.3f} at IoU>=0.9 of {v['n']}"
                           for s, v in z["by_shape"].items())
        fields = ", ".join(f"{k} {z[k]:.3f}" for k in FIELDS)
        print(f"real_zones ({z['n']}): valid {z['valid_rate']:.3f}, footprints at IoU>=0.9 {z['iou90']:.3f} "
              f"(mean IoU {z['iou_mean']:.3f}; {shapes}); field EM {z['field_em']:.3f} ({fields})")
        if c := z.get("confidence"):
            print(f"real_zones confidence: at {c['threshold']:.4f} keeps {c['right_kept']:.3f} of {c['n_right']} "
                  f"right records and sets aside {c['wrong_set_aside']:.3f} of {c['n_wrong']} wrong ones")
    if g := report.get("negatives"):
        print(f"negatives: no zone on {g['notams_no_zone']:.3f} of {g['n_notams']} dev NOTAMs that define none "
              f"({g['with_position_no_zone']:.3f} of the {g['n_with_position']} obstacles at a position), "
              f"on {g['garbage_no_zone']:.3f} of {g['n_garbage']} garbage texts")
    for name in HANDWRITTEN:
        if h := report.get(name):
            wrong = "; ".join(f"{k}: {', '.join(v)}" for k, v in h["misses"].items()) or "none"
            print(f"{name}: {h['right']} of {h['n']} notices read right; wrong: {wrong}")
    if (c := (report.get("real_zones") or {}).get("confidence")) and (sets := [k for k in NEW if k in report]):
        a = set_aside([report[k] for k in sets], c["threshold"])
        print(f"{', '.join(sets)} confidence: at {c['threshold']:.4f} sets aside "
              f"{a['wrong_set_aside']} of {a['n_wrong']} wrong notices and {a['right_set_aside']} of {a['n_right']} "
              "right ones")
    line = json.dumps(report)
    if args.out:
        Path(args.out).write_text(line + "\n")
    print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
