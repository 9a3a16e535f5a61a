"""The command line, in-process through main(argv) and, for a kill, as a subprocess."""

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter

import pytest
import torch

from clover_struct import batch_io, cli
from clover_struct.engine.checkpoint import save_model
from clover_struct.engine.config import preset
from clover_struct.engine.model import CloverModel
from clover_struct.errors import CheckpointError
from clover_struct.schema_walk import build_canvas

SCHEMA = {"title": "Zone", "type": "object", "required": ["name", "kind"],
          "properties": {"name": {"type": "string", "maxLength": 6}, "kind": {"enum": ["circle", "polygon"]}}}
PYDANTIC = '''
from typing import Literal
from pydantic import BaseModel, Field

class Zone(BaseModel):
    name: str = Field(max_length=6)
    kind: Literal["circle", "polygon"]
'''
CONTEXT = 256   # small, so a long text overflows it


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory, toy_tokenizer):
    torch.manual_seed(0)
    tok = toy_tokenizer
    config = preset("tiny", vocab_size=tok.vocab_size, mask_token_id=tok.mask_id, pad_token_id=tok.pad_id,
                    eos_token_id=tok.eos_id, block_size=16, max_position_embeddings=CONTEXT)
    model = CloverModel(config, tok).init_weights(std=0.5).eval()   # peaked: no near-ties between runs
    return str(save_model(model, tmp_path_factory.mktemp("model")))


@pytest.fixture
def schema_file(tmp_path):
    path = tmp_path / "zone.schema.json"
    path.write_text(json.dumps(SCHEMA))
    return str(path)


def lines(path):
    return [json.loads(line) for line in open(path, encoding="utf-8")]


def run(*argv):
    return cli.main([str(a) for a in argv])


def test_truncate_reads_the_start_of_a_text_longer_than_the_context(tmp_path, model_dir, schema_file):
    (tmp_path / "long.txt").write_text("zone " * CONTEXT)
    assert run("extract", tmp_path / "long.txt", "--schema", schema_file, "--model", model_dir, "-o",
               tmp_path / "a.jsonl") == 1
    assert "--truncate" in lines(tmp_path / "a.errors.jsonl")[0]["error"]
    assert run("extract", tmp_path / "long.txt", "--schema", schema_file, "--model", model_dir, "-o",
               tmp_path / "b.jsonl", "--truncate") == 0
    assert set(lines(tmp_path / "b.jsonl")[0]["record"]) == {"name", "kind"}


def test_bad_records_go_to_the_errors_file_and_the_good_ones_are_written(tmp_path, model_dir, schema_file, capsys):
    d = tmp_path / "in"
    (d / "sub").mkdir(parents=True)
    (d / "a.txt").write_text("no-fly zone over the harbour")
    (d / "b.md").write_text("# notice\ndrones banned near the stadium")
    (d / "bin.txt").write_bytes(b"\x00\x01\xffPNG")
    (d / "dangling.txt").symlink_to(d / "gone.txt")                  # unreadable
    (d / "empty.txt").write_text("  \n")
    (d / "long.txt").write_text("x" * (CONTEXT + 50))                 # longer than the context
    (d / "feed.jsonl").write_text('{"text": "zone three"}\n{not json\n{"body": "no text field"}\n'
                                  '{"text": 5}\n\n[1, 2]\n{"text": "zone four", "id": 4}\n')
    (d / "none.jsonl").write_text("")                                 # a row says each holds no line
    (d / "blank.ndjson").write_text("\n \n")
    (d / "photo.png").write_bytes(b"\x89PNG")                         # a directory skips other suffixes
    (d / "sub" / "c.txt").write_text("zone five")
    out = d / "zones.jsonl"                                           # inside the input: never read back
    assert run("extract", d, "--schema", schema_file, "--model", model_dir, "-o", out, "--batch-size", 3) == 1

    got = lines(out)
    assert [r["source"] for r in got] == [str(d / n) for n in ("a.txt", "b.md", "feed.jsonl:1", "feed.jsonl:7",
                                                                 "sub/c.txt")]
    for r in got:
        assert set(r["record"]) == {"name", "kind"}
        assert r["record"]["kind"] in ("circle", "polygon") and len(r["record"]["name"]) <= 6
    errors = {e["source"].removeprefix(str(d) + "/"): e["error"] for e in lines(d / "zones.errors.jsonl")}
    expected = {"bin.txt": "binary", "dangling.txt": "cannot read", "empty.txt": "empty",
                "long.txt": "tokens", "feed.jsonl:2": "invalid JSON", "feed.jsonl:3": "--text-field",
                "feed.jsonl:4": "not a string", "feed.jsonl:6": "not a JSON object",
                "none.jsonl": "no JSON line", "blank.ndjson": "no JSON line"}
    assert set(errors) == set(expected)
    for source, word in expected.items():
        assert word in errors[source], (source, errors[source])
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "5 succeeded, 10 failed" in err[0] and "zones.errors.jsonl" in err[0]
    assert batch_io.count([d], exclude=[out, d / "zones.errors.jsonl"]) == 15   # the bar's total: every row


def test_each_record_carries_its_confidence_and_min_confidence_sets_the_unsure_aside(tmp_path, model_dir,
                                                                                     schema_file):
    feed = tmp_path / "feed.jsonl"
    feed.write_text("".join(json.dumps({"text": f"zone number {i}"}) + "\n" for i in range(4)))
    common = ["extract", feed, "--schema", schema_file, "--model", model_dir, "--quiet"]
    assert run(*common, "-o", tmp_path / "all.jsonl") == 0
    kept = lines(tmp_path / "all.jsonl")
    cuts = sorted(r["confidence"] for r in kept)
    assert len(kept) == 4 and all(0 < c <= 1 for c in cuts)
    assert run(*common, "-o", tmp_path / "sure.jsonl", "--min-confidence", cuts[2]) == 1
    assert [r["source"] for r in lines(tmp_path / "sure.jsonl")] == [r["source"] for r in kept
                                                                     if r["confidence"] >= cuts[2]]
    unsure = lines(tmp_path / "sure.errors.jsonl")   # the record kept beside the reason
    assert [{k: r[k] for k in ("source", "record", "confidence")} for r in unsure] == \
        [r for r in kept if r["confidence"] < cuts[2]]
    assert all(re.search(rf"confidence in field `(name|kind)` is {r['confidence']}, below --min-confidence", r["error"])
               for r in unsure)   # as written on the line (it had been 3 places: '1.000, below 1.0')
    assert run(*common, "--min-confidence", 2) == 2


def test_a_record_with_no_fields_is_certain(tmp_path, model_dir):
    """A schema without fields gives records the model chose nothing in: confidence 1.0 (the line
    had carried none, and --min-confidence had nothing to compare)."""
    schema = tmp_path / "empty.json"
    schema.write_text(json.dumps({"type": "object", "properties": {}, "additionalProperties": False}))
    (tmp_path / "a.txt").write_text("anything at all")
    assert run("extract", tmp_path / "a.txt", "--schema", schema, "--model", model_dir, "--quiet",
               "-o", tmp_path / "out.jsonl", "--min-confidence", 1) == 0
    assert lines(tmp_path / "out.jsonl") == [{"source": str(tmp_path / "a.txt"), "record": {}, "confidence": 1.0}]


def test_stdout_json_summary_and_a_pydantic_class(tmp_path, model_dir, monkeypatch, capsys):
    (tmp_path / "zonemod.py").write_text(PYDANTIC)
    monkeypatch.syspath_prepend(str(tmp_path))
    for name, text in (("a.txt", "zone alpha"), ("b.txt", "zone beta"), ("c.md", "")):
        (tmp_path / name).write_text(text)
    argv = ["extract", tmp_path / "a.txt", tmp_path / "*.md", tmp_path / "b.txt", "--schema", "zonemod:Zone",
            "--model", model_dir, "--json", "--quiet"]
    assert run(*argv) == 1
    out, err = capsys.readouterr()   # without -o: records on stdout; error rows, then the summary, on stderr
    records = [json.loads(line) for line in out.splitlines()]
    assert [r["source"] for r in records] == [str(tmp_path / "a.txt"), str(tmp_path / "b.txt")]
    assert all(set(r["record"]) == {"name", "kind"} for r in records)
    *rows, summary = [json.loads(line) for line in err.splitlines()]
    assert [row["source"] for row in rows] == [str(tmp_path / "c.md")]
    assert summary["succeeded"] == 2 and summary["failed"] == 1 and summary["output"] is None

    (tmp_path / "c.md").write_text("zone gamma")
    (tmp_path / "z.errors.jsonl").write_text('{"source": "old", "error": "stale"}\n')  # a fresh run drops it
    assert run(*argv, "-o", tmp_path / "z.jsonl") == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["succeeded"] == 3 and err == ""
    assert not (tmp_path / "z.errors.jsonl").exists()


@pytest.mark.slow
def test_a_killed_run_resumes_to_exactly_the_uninterrupted_output(tmp_path, model_dir, schema_file):
    feed = tmp_path / "feed.jsonl"
    rows = [json.dumps({"text": f"notice {i}: zone {chr(97 + i) * (1 + i % 4)}"}) for i in range(12)]
    rows[4] = "{broken"
    feed.write_text("\n".join(rows) + "\n")
    common = ["extract", str(feed), "--schema", schema_file, "--model", model_dir, "--batch-size", "2", "--quiet"]
    assert run(*common, "-o", tmp_path / "ref.jsonl") == 1                   # the uninterrupted run

    killed = tmp_path / "killed.jsonl"
    proc = subprocess.Popen([sys.executable, "-m", "clover_struct.cli", *common, "-o", str(killed)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env={**os.environ, "OMP_NUM_THREADS": "1"})
    deadline = time.monotonic() + 120
    while not (killed.exists() and killed.read_bytes().count(b"\n") >= 1):
        assert proc.poll() is None and time.monotonic() < deadline, "the run ended before it could be killed"
        time.sleep(0.005)
    proc.send_signal(signal.SIGKILL)
    assert proc.wait() == -signal.SIGKILL
    before = killed.read_bytes().count(b"\n")
    with open(killed, "ab") as f:                                           # a write the kill cut short
        f.write(b'{"source": "' + str(feed).encode() + b':12", "rec')

    assert run(*common, "-o", killed, "--resume") == 1
    ref, got = lines(tmp_path / "ref.jsonl"), lines(killed)
    assert before < len(ref) == len(got)
    assert got == ref                                                       # same records, same order
    assert Counter(map(json.dumps, got)) == Counter(map(json.dumps, ref))   # so no duplicates either
    assert lines(tmp_path / "killed.errors.jsonl") == lines(tmp_path / "ref.errors.jsonl") != []
    assert run(*common, "-o", killed, "--resume") == 1 and lines(killed) == ref   # nothing left to do


@pytest.mark.parametrize("spec, message", [
    ("no_such_module_xyz:Zone", "cannot import module `no_such_module_xyz`"),
    ("clover_struct.schemas.airspace:Nope", "has no `Nope`; its pydantic models are: "),
    ("clover_struct.schemas.airspace:LAT_PIECE", "not a pydantic model class"),
    ("missing.schema.json", "no such file"),
    ("bad.json", "not valid JSON"),
    ("list.json", "not a JSON Schema (expected an object"),
])
def test_bad_schema_specs_are_one_clear_line(tmp_path, monkeypatch, capsys, spec, message):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "bad.json").write_text("{not json")
    (tmp_path / "list.json").write_text("[1, 2]")
    (tmp_path / "a.txt").write_text("text")
    assert run("extract", "a.txt", "--schema", spec) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.splitlines()) == 1
    assert err.startswith("clover-struct: error: ") and message in err
    if "Nope" in spec:
        assert "NoFlyZone" in err


def test_debug_variable_shows_the_traceback(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("CLOVER_DEBUG", "1")
    (tmp_path / "a.txt").write_text("text")
    assert run("extract", tmp_path / "a.txt", "--schema", "no_such_module_xyz:Zone") == 2
    err = capsys.readouterr().err
    assert "Traceback" in err and err.splitlines()[-1].startswith("clover-struct: error: ")


def test_missing_inputs_and_bad_options(tmp_path, schema_file, capsys):
    assert run("extract", tmp_path / "nope.txt", "--schema", schema_file) == 2
    assert f"{tmp_path / 'nope.txt'}: no such file or directory" in capsys.readouterr().err
    assert run("extract", tmp_path / "*.zzz", "--schema", schema_file) == 2
    assert "no file matches" in capsys.readouterr().err
    (tmp_path / "a.txt").write_text("text")
    assert run("extract", tmp_path / "a.txt", "--schema", schema_file, "--resume") == 2
    assert "--resume needs -o" in capsys.readouterr().err


def test_no_model_installed_is_one_clear_line(monkeypatch, capsys):
    def missing(path=None, **_):
        raise CheckpointError("the embedded model is not in this installation")
    monkeypatch.setattr("clover_struct.api.load_model", missing)
    assert run("info") == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and "not in this installation" in err[0] and "--model DIR" in err[0]


def test_info_prints_the_architecture(model_dir, capsys):
    assert run("info", "--model", model_dir) == 0
    out = dict(line.split(":", 1) for line in capsys.readouterr().out.splitlines())
    out = {k: v.strip() for k, v in out.items()}
    model = cli.load_model(model_dir)
    assert out["source"] == model_dir
    assert out["layers"].startswith("4: 3 linear_attention (Gated DeltaNet), 1 full_attention")
    assert out["hidden size"] == "32" and "top-2" in out["experts"] and out["experts"].startswith("4,")
    assert out["parameters"] == f"{sum(p.numel() for p in model.parameters()):,}"
    assert out["vocabulary"].startswith(str(model.config.vocab_size))
    assert (out["mask id"], out["pad id"]) == (str(model.config.mask_token_id), str(model.config.pad_token_id))
    assert out["block size"] == "16" and out["context"] == str(CONTEXT)


def test_schema_prints_the_canvas(model_dir, schema_file, capsys):
    assert run("schema", schema_file, "--model", model_dir) == 0
    model = cli.load_model(model_dir)
    assert capsys.readouterr().out == build_canvas(SCHEMA, model.tokenizer).describe() + "\n"


def test_a_schema_file_brings_the_files_it_refers_to(tmp_path, model_dir, capsys):
    """The schema's `kind` lives in a file beside it: the canvas is the one-file schema's."""
    (tmp_path / "kinds.json").write_text(json.dumps({"$defs": {"kind": SCHEMA["properties"]["kind"]}}))
    split = {**SCHEMA, "properties": {**SCHEMA["properties"], "kind": {"$ref": "kinds.json#/$defs/kind"}}}
    (tmp_path / "zone.json").write_text(json.dumps(split))
    assert run("schema", tmp_path / "zone.json", "--model", model_dir) == 0
    model = cli.load_model(model_dir)
    assert capsys.readouterr().out == build_canvas(SCHEMA, model.tokenizer).describe() + "\n"
    (tmp_path / "kinds.json").unlink()
    assert run("schema", tmp_path / "zone.json", "--model", model_dir) == 2
    assert "zone.json refers to the file" in capsys.readouterr().err


def test_the_progress_bar_advances_per_record_on_a_tty_and_is_one_summary_line_otherwise(
        tmp_path, model_dir, schema_file, monkeypatch, capsys):
    feed = tmp_path / "f.jsonl"
    feed.write_text("".join(json.dumps({"text": f"zone {i}"}) + "\n" for i in range(5)) + "{broken\n")
    argv = ["extract", feed, "--schema", schema_file, "--model", model_dir, "-o", tmp_path / "o.jsonl",
            "--batch-size", 4]
    assert run(*argv) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "5 succeeded, 1 failed" in err          # not a tty: the summary alone

    updates = []
    import tqdm

    real = tqdm.tqdm.update
    monkeypatch.setattr(tqdm.tqdm, "update", lambda bar, n=1: updates.append((bar.n, bar.total)) or real(bar, n))
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    assert run(*argv) == 1
    assert updates == [(n, 6) for n in range(6)]                              # one step per record
    err = capsys.readouterr().err
    assert "/6 [" in err and "rec/s" in err and "5 succeeded, 1 failed" in err.splitlines()[-1]
    assert run(*argv, "--quiet") == 1 and len(updates) == 6                   # --quiet: no bar
    assert batch_io.count([tmp_path], exclude=[tmp_path / "o.jsonl", tmp_path / "o.errors.jsonl"]) == 6


def test_inputs_are_streamed_and_decoded_a_batch_at_a_time(tmp_path, model_dir, schema_file, monkeypatch):
    import inspect

    import clover_struct.api

    calls = []

    from clover_struct.rows import Trace

    def fake(texts, schema, *, model, batch_size, trace, truncate):
        calls.append(list(texts))
        return [({"name": t[-6:], "kind": "circle"}, Trace()) for t in texts]
    monkeypatch.setattr(clover_struct.api, "extract_many", fake)
    feed = tmp_path / "f.jsonl"
    feed.write_text("".join(json.dumps({"text": f"text {i}"}) + "\n" for i in range(7)))
    assert inspect.isgenerator(batch_io.records(batch_io.files([feed]), "text"))
    assert run("extract", feed, "--schema", schema_file, "--model", model_dir, "-o", tmp_path / "o.jsonl",
               "--batch-size", 3, "--quiet") == 0
    assert [len(c) for c in calls] == [3, 3, 1]
    assert [r["record"]["name"] for r in lines(tmp_path / "o.jsonl")] == [f"text {i}" for i in range(7)]
