"""The evaluation's comparisons: normalised values, and a failed record scores nothing."""

import datetime as dt
import json

import pytest

from clover_struct import ExtractionError
from training import evaluate as ev
from training.generate import examples


def test_values_compare_normalised():
    assert ev.same(51.50004, 51.5) and not ev.same(51.502, 51.5)
    assert ev.same("WI  1NM\nRADIUS", "WI 1NM RADIUS") and ev.same("", None)
    utc = dt.timezone.utc
    assert ev.same(dt.datetime(2024, 1, 2, 3, 4), dt.datetime(2024, 1, 2, 3, 4, tzinfo=utc))
    assert ev.same_id("N0556/26", "N556/26") and not ev.same_id("N0556/26", "N0557/26")


def test_real_reference_reads_perm_and_blanks():
    ref = {"valid_to": "PERM", "valid_from": "2023-06-28T12:16:00+00:00", "scope": "", "fir": "EGTT",
           "valid_to_est": False}
    out = ev.real_reference(ref)
    assert out["permanent"] is True and out["valid_to"] is None and out["scope"] is None
    assert out["valid_from"] == dt.datetime(2023, 6, 28, 12, 16, tzinfo=dt.timezone.utc)
    assert "valid_to_est" not in out


def test_scores_count_fields_and_records(monkeypatch):
    pairs = examples("notam", 3, 11)
    golds = [g for _, g in pairs]
    monkeypatch.setattr(ev, "extract_many", lambda *a, **k: [golds[0], ExtractionError("x", "no"), golds[2]])
    r = ev.score(pairs, type(golds[0]), model=None, names=ev.NOTAM_FIELDS)
    assert r["valid_rate"] == 2 / 3 and r["record_em"] == 2 / 3 and abs(r["field_em"] - 2 / 3) < 1e-9


def test_scores_break_down_by_field(monkeypatch):
    pairs = examples("notam", 2, 11)
    golds = [g for _, g in pairs]
    wrong = golds[1].model_copy(update={"fir": "ZZZZ" if golds[1].fir != "ZZZZ" else "YYYY"})
    monkeypatch.setattr(ev, "extract_many", lambda *a, **k: [golds[0], wrong])
    r = ev.score(pairs, type(golds[0]), model=None, names=ev.NOTAM_FIELDS)
    assert r["per_field"]["fir"] == 0.5 and r["per_field"]["qcode"] == 1.0
    assert set(r["per_field"]) == set(ev.NOTAM_FIELDS)


def test_sets_runs_only_the_sets_named(monkeypatch, capsys):
    monkeypatch.setattr(ev, "load_model", lambda path: None)
    monkeypatch.setattr(ev, "extract_many", lambda texts, *a, **k: [ExtractionError("x", "no")] * len(texts))
    assert ev.main(["--quick", "--sets", "zones,dispatch"]) == 0
    report = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert list(report) == ["zones", "dispatch"] and report["zones"]["valid_rate"] == 0.0
    with pytest.raises(SystemExit, match="unknown dispach"):
        ev.main(["--quick", "--sets", "dispach"])


@pytest.mark.slow
def test_judgments_take_the_geometric_facts_from_the_extracted_zones(monkeypatch):
    """The geometric answers come from the zones extracted from each notice: from the true
    zones they are all right, and from failed notices (no zones) they say nothing is crossed."""
    from clover_struct.schemas.dispatch import Action, DispatchJudgments
    from training.generate import judgment_cases

    cases = judgment_cases(12, 5)

    def decide(text, schema, model=None, rules=None, known=None, joint=True):
        k = {"crosses_zone": False, "vertical_overlap": False, "time_overlap": False, "conflict": False, **(known or {})}
        return DispatchJudgments(**k, authorisation_needed=k["conflict"], route_must_change=False,
                                 can_start_now=not k["conflict"],
                                 action=Action.REQUEST_AUTHORISATION if k["conflict"] else Action.PROCEED)

    monkeypatch.setattr(ev, "decide", decide)
    monkeypatch.setattr(ev, "extract_many", lambda texts, *a, **k: [z for c in cases for z in c.zones])
    right = ev.score_judgments(cases, model=None)
    assert right["facts_accuracy"] == 1.0 and right["accuracy"] == right["accuracy_true_geometry"]
    assert right["failed_notices"] == 0 and right["notices"] == sum(len(c.notices) for c in cases)
    assert right["model_only"]["accuracy"] < right["accuracy"]   # from the text alone no facts are known

    monkeypatch.setattr(ev, "extract_many", lambda texts, *a, **k: [ExtractionError("x", "no")] * len(texts))
    failed = ev.score_judgments(cases, model=None)
    crossed = sum(c.gold.crosses_zone for c in cases)
    assert failed["failed_notices"] == failed["notices"] and 0 < crossed < len(cases)
    assert failed["facts_accuracy"] < 1.0 and failed["accuracy"] < right["accuracy"]
