"""Extraction over many processes: `Extractor` in-process, pickled and under Ray Data's map_batches,
and `clover-struct extract --ray` on a local Ray cluster that the tests start (2 CPUs): the same
output as a single-process run, resume, and a worker killed mid-run."""

import json
import os
import pickle
import sys
from pathlib import Path
from typing import Literal

import pytest
from pydantic import BaseModel, Field, model_validator

from clover_struct import CloverError, Extractor, UsageError, extract_many, load_model
from clover_struct.distributed import outcome
from test_cli import SCHEMA, lines, model_dir, run, schema_file  # noqa: F401  (fixtures)

ROOT = Path(__file__).resolve().parents[1]
DEV = ROOT.parent / "shared" / "data" / "notams-dev.jsonl"   # real notices: read there, never copied
DEMO = ROOT / "clover_struct" / "demo" / "notices.jsonl"
DIE_ONCE = "CLOVER_TEST_DIE_ONCE"   # set only in the Ray workers: the marker file of DyingZone


class DyingZone(BaseModel):
    """test_cli's Zone, whose validation ends its process the first time it runs in a Ray worker."""
    name: str = Field(max_length=6)
    kind: Literal["circle", "polygon"]

    @model_validator(mode="before")
    @classmethod
    def die_once(cls, data):
        marker = os.environ.get(DIE_ONCE)
        if marker and not os.path.exists(marker):
            Path(marker).touch()
            os._exit(1)   # no exception, no cleanup: as a process the kernel kills
        return data


TEXTS = [f"notice {i}: zone {chr(97 + i % 26) * (1 + i % 4)} {'circle' if i % 3 else 'polygon'}" for i in range(10)]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    ray = pytest.importorskip("ray", reason="the Ray tests need the extra: pip install -e '.[test,ray]'")
    marker = tmp_path_factory.mktemp("die") / "died"
    tests = str(Path(__file__).parent)   # workers import this module for DyingZone
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {DIE_ONCE: str(marker),
                                       "PYTHONPATH": os.pathsep.join([tests, *sys.path])}})
    yield marker
    ray.shutdown()


def same(got: list[dict], expected: list[dict]) -> bool:
    """Output lines alike: each line's record and error the same, its confidence to 1e-3 (a
    worker's threads may sum a float in another order)."""
    def strip(rows):
        return [{k: v for k, v in r.items() if k != "confidence"} for r in rows]
    return strip(got) == strip(expected) and [r.get("confidence") for r in got] == \
        pytest.approx([r.get("confidence") for r in expected], abs=1e-3)


def feed(path, texts=TEXTS, broken=(3,)):
    rows = [json.dumps({"text": t}) if i not in broken else "{broken" for i, t in enumerate(texts)]
    path.write_text("\n".join(rows) + "\n")
    return path


# ---- Extractor, in this process ------------------------------------------------------------------
def test_the_extractor_adds_the_record_and_its_error_to_a_batch_of_either_kind(model_dir):
    np = pytest.importorskip("numpy")
    ex = Extractor(SCHEMA, model=model_dir, batch_size=4)
    texts = TEXTS[:5] + [""]
    expected = [outcome(v) for v in extract_many(texts, SCHEMA, model=load_model(model_dir), batch_size=4, trace=True)]
    out = ex({"text": np.array(texts), "id": np.arange(6)})
    assert list(out["id"]) == list(range(6))
    got = [(None if r is None else json.loads(r), e) for r, e in zip(out["record"], out["error"])]
    assert got == [(r, e) for r, e, _ in expected] and got[-1][0] is None and "empty" in got[-1][1]
    assert sum(r is not None for r, _ in got) == 5
    assert list(out["confidence"]) == [low and pytest.approx(low[1]) for _, _, low in expected]
    assert all(0 < c <= 1 for c in out["confidence"][:5]) and out["confidence"][5] is None

    pd = pytest.importorskip("pandas")
    frame = ex(pd.DataFrame({"text": texts}))
    assert list(frame.columns) == ["text", "record", "error", "confidence"]
    assert list(frame["record"]) == list(out["record"]) and list(frame["error"]) == list(out["error"])

    wide = Extractor(SCHEMA, model=model_dir, batch_size=4, columns=True)(pd.DataFrame({"text": texts}))
    assert list(wide.columns) == ["text", "name", "kind", "error", "confidence"]
    assert [None if r is None else {"name": n, "kind": k} for (r, _, _), n, k in
            zip(expected, wide["name"], wide["kind"])] == [r for r, _, _ in expected]


@pytest.mark.parametrize("schema", [{"type": "integer"}, {"type": "array", "items": {"type": "integer"}},
                                    {"type": "object", "additionalProperties": {"type": "integer"}}])
def test_columns_are_refused_for_a_record_that_is_no_object_of_named_keys(model_dir, schema):
    """Its values had been dropped (no column held them, and no error said so)."""
    with pytest.raises(UsageError, match="no object of named keys"):
        Extractor(schema, model=model_dir, columns=True)


class Contact(BaseModel):
    full_name: str = Field(validation_alias="fullName", serialization_alias="name", max_length=8)
    age: int = Field(alias="years")


def test_columns_and_records_name_the_keys_as_pydantic_writes_them(model_dir):
    out = Extractor(Contact, model=model_dir, columns=True)({"text": ["Alice Smith, 30"]})
    assert set(out) == {"text", "name", "years", "error", "confidence"} and out["error"] == [None]
    assert out["name"][0] is not None and out["years"][0] is not None   # (None before: keys by other names)
    (record,) = Extractor(Contact, model=model_dir)({"text": ["Alice Smith, 30"]})["record"]
    assert set(json.loads(record)) == {"name", "years"}


def test_the_extractor_pickles_as_its_arguments_and_says_what_a_batch_lacks(model_dir):
    np = pytest.importorskip("numpy")
    ex = Extractor(SCHEMA, model=load_model(model_dir), text_field="body")
    data = pickle.dumps(ex)
    assert len(data) < 10_000   # the model's directory, not its weights
    copy = pickle.loads(data)
    batch = {"body": np.array(TEXTS[:3])}
    assert list(copy(batch)["record"]) == list(ex(batch)["record"])
    with pytest.raises(ValueError, match="no column `body`.*text_field="):
        ex({"text": np.array(TEXTS[:1])})
    with pytest.raises(ValueError, match="already has column.*error"):
        ex({"body": np.array(TEXTS[:1]), "error": np.array([None])})
    with pytest.raises(ValueError, match="model= takes a model directory"):
        Extractor(SCHEMA, model=3)
    for batch in ([{"body": "x"}], None, "x"):   # (a raw TypeError, or rows read as column names, before)
        with pytest.raises(UsageError, match="a dict of arrays or a pandas DataFrame"):
            ex(batch)


def test_the_extractor_takes_its_texts_from_one_column_and_its_copy_the_model_as_loaded(model_dir):
    """Two `text` columns had been decoded as their names; text_field="record" overwritten by the
    records; a column of one string decoded letter by letter; a column labelled 0 a KeyError; a
    copy loaded float32 where the original ran bfloat16; and truncate= was not taken."""
    import torch

    pd = pytest.importorskip("pandas")
    np = pytest.importorskip("numpy")
    ex = Extractor(SCHEMA, model=model_dir)
    twice = pd.DataFrame([["zone one", "zone two"]], columns=["text", "text"])
    for batch, words in ((twice, "more than one column `text`"), ({"text": "zone one"}, "one str, not a column")):
        with pytest.raises(UsageError, match=words):
            ex(batch)
    with pytest.raises(UsageError, match="would replace the texts"):
        Extractor(SCHEMA, model=model_dir, text_field="record")
    labelled = pd.DataFrame([["zone one"]])   # a frame of lists: its column is 0
    assert list(Extractor(SCHEMA, model=model_dir, text_field="0")(labelled)["error"]) == [None]
    half = load_model(model_dir, dtype=torch.bfloat16)
    copy = pickle.loads(pickle.dumps(Extractor(SCHEMA, model=half)))
    assert next(copy.model.parameters()).dtype == torch.bfloat16
    long = {"text": np.array(["zone " * 3000])}
    assert "truncate" in Extractor(SCHEMA, model=model_dir)(long)["error"][0]
    assert Extractor(SCHEMA, model=model_dir, truncate=True)(long)["error"][0] is None


class Clashing(BaseModel):
    text: str = Field(max_length=4)
    error: bool


@pytest.mark.parametrize("text_field", ["text", "body"])
def test_columns_that_would_clash_with_the_output_s_are_refused(model_dir, text_field):
    """The record's `text` had replaced the texts, its `error` been dropped for the outcome's."""
    with pytest.raises(UsageError, match="would be a column the output has already"):
        Extractor(Clashing, model=model_dir, columns=True, text_field=text_field)


# ---- the CLI's mistakes, no cluster needed ---------------------------------------------------------
def test_ray_options_given_wrongly_are_one_line(tmp_path, model_dir, schema_file, monkeypatch, capsys):
    f = feed(tmp_path / "feed.jsonl")
    assert run("extract", f, "--schema", schema_file, "--model", model_dir, "--workers", 2) == 2
    assert "--workers needs --ray" in capsys.readouterr().err
    assert run("extract", "--ray", f, f, "--schema", schema_file, "--model", model_dir) == 2
    assert "write --ray=ADDRESS" in capsys.readouterr().err
    monkeypatch.setitem(sys.modules, "ray", None)   # as if Ray were not installed
    assert run("extract", f, "--ray", "--schema", schema_file, "--model", model_dir) == 2
    err = capsys.readouterr().err
    assert "pip install 'clover-struct[ray]'" in err and len(err.strip().splitlines()) == 1


def test_a_ray_address_nothing_answers_at_is_said_at_once():
    """Ray had retried for 14 minutes before saying so."""
    from clover_struct.distributed import _reachable

    with pytest.raises(CloverError, match="nothing answers at 127.0.0.1:1"):
        _reachable("127.0.0.1:1")
    _reachable(None), _reachable("auto"), _reachable("ray://head:10001")   # local, or Ray's to read


# ---- on the local cluster: slow (its start and each run's workers, a model each, take tens of seconds) ----
@pytest.mark.slow
def test_ray_output_equals_the_single_process_output_and_resumes(cluster, tmp_path, model_dir, schema_file, capsys):
    f = feed(tmp_path / "feed.jsonl")
    common = ["--schema", schema_file, "--model", model_dir, "--batch-size", 2, "--quiet"]
    assert run("extract", f, *common, "-o", tmp_path / "one.jsonl") == 1
    assert run("extract", f, "--ray", "--workers", 2, *common, "-o", tmp_path / "ray.jsonl") == 1
    one, ray_ = lines(tmp_path / "one.jsonl"), lines(tmp_path / "ray.jsonl")
    assert len(one) == 9 and same(ray_, one)
    assert lines(tmp_path / "ray.errors.jsonl") == lines(tmp_path / "one.errors.jsonl") != []

    out = tmp_path / "ray.jsonl"   # as if the run had stopped after 4 records: resume writes the rest once
    out.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in one[:4]))
    capsys.readouterr()
    assert run("extract", f, "--ray", *common, "-o", out, "--resume") == 1
    assert same(lines(out), one)
    assert "9 succeeded, 1 failed" in capsys.readouterr().err

    assert run("extract", f, "--ray", "--workers", 3, *common) == 2
    assert "ask for 1 to 2" in capsys.readouterr().err
    before = out.read_bytes()   # a mistake of the setup leaves the earlier output as it was (it had been emptied)
    assert run("extract", f, "--ray", "--workers", 3, *common, "-o", out) == 2 and out.read_bytes() == before
    assert run("extract", f, "--ray", "--schema", "nowhere_but_here:Zone", "--model", model_dir, "-o", out) == 2
    assert out.read_bytes() == before


@pytest.mark.slow
def test_a_worker_killed_mid_run_loses_and_repeats_no_record(cluster, tmp_path, model_dir, schema_file):
    f = feed(tmp_path / "feed.jsonl", broken=())
    common = ["--schema", "test_distributed:DyingZone", "--model", model_dir, "--batch-size", 2, "--quiet"]
    assert run("extract", f, *common, "-o", tmp_path / "one.jsonl") == 0   # here DIE_ONCE is unset
    assert not cluster.exists()
    assert run("extract", f, "--ray", "--workers", 2, *common, "-o", tmp_path / "ray.jsonl") == 0
    assert cluster.exists()   # a worker did die (and was restarted, its batch retried)
    got = lines(tmp_path / "ray.jsonl")
    assert [r["source"] for r in got] == [f"{f}:{i}" for i in range(1, 11)]
    assert same(got, lines(tmp_path / "one.jsonl"))


@pytest.mark.slow
def test_the_extractor_under_ray_data_map_batches(cluster, model_dir):
    ray = pytest.importorskip("ray")
    rows = [{"id": i, "text": t} for i, t in enumerate(TEXTS + [""])]
    ds = ray.data.from_items(rows).map_batches(
        Extractor, fn_constructor_kwargs={"schema": SCHEMA, "model": model_dir, "batch_size": 4},
        batch_size=4, concurrency=2)
    got = sorted(ds.take_all(), key=lambda r: r["id"])
    expected = [outcome(v)[:2] for v in extract_many([r["text"] for r in rows], SCHEMA, model=load_model(model_dir),
                                                     batch_size=4, trace=True)]
    assert [r["text"] for r in got] == [r["text"] for r in rows]
    assert [(None if r["record"] is None else json.loads(r["record"]), r["error"]) for r in got] == expected
    assert expected[-1][1] is not None and all(e is None for _, e in expected[:-1])


@pytest.mark.slow
def test_ray_output_equals_the_single_process_output_on_real_notices(cluster, tmp_path, capsys):
    """100 real dev notices (the 20 demo notices where ../shared/data is absent) on clover-mini."""
    source = DEV if DEV.is_file() else DEMO
    f = tmp_path / "notices.jsonl"   # a temporary copy of the first 100, outside the repository
    with open(source, encoding="utf-8") as h:
        f.write_text("".join(line for _, line in zip(range(100), h)), encoding="utf-8")
    common = ["--schema", "clover_struct.schemas.notam:Notam", "--quiet"]
    assert run("extract", f, *common, "-o", tmp_path / "one.jsonl") in (0, 1)
    assert run("extract", f, "--ray", *common, "-o", tmp_path / "ray.jsonl") in (0, 1)
    rows = lambda name: lines(tmp_path / name) if (tmp_path / name).exists() else []  # noqa: E731
    assert len(rows("one.jsonl") + rows("one.errors.jsonl")) == len(f.read_text(encoding="utf-8").splitlines())
    assert same(rows("ray.jsonl"), rows("one.jsonl")) and rows("one.jsonl")
    assert same(rows("ray.errors.jsonl"), rows("one.errors.jsonl"))
