"""The schema corpus (tests/schema_corpus) and the coverage benchmark that runs it.

tests/schema_corpus holds JSON Schemas written for this project: keywords/ has one small file
per keyword or construct that real schemas use, realistic/ has schemas in the shapes real APIs
use. tests/schema_corpus/expect.json says, per file, what a correct library does with it:
"valid" (laid out, and every instance extract returns validates against the file with
jsonschema) or "refused" (a SchemaError whose message matches a regex).

- test_corpus_against_the_manifest (slow): every keyword file through `extract` with a tiny
  random model, greedily and sampled, checked against the manifest; every realistic file is
  laid out and compiled (test_each_realistic_schema_lays_out). A decode the manifest lists
  under the file's "gaps" (with the reason) is expected to fail, strictly, and only with the
  ExtractionError the library owes a value it cannot make valid: an invalid instance or any
  other error still fails the run, and the day a gap passes, the test says so and the gap is
  struck from the manifest.
- The other tests check the corpus itself (every file a schema its draft's metaschema accepts,
  every $ref resolvable, every "valid" file satisfiable by the manifest's example, the manifest
  and the folder in step) and that benchmarks/schema_coverage.py runs and counts right.
"""

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from clover_struct import ExtractionError, SchemaError, extract
from clover_struct.api import prepare

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "tests" / "schema_corpus"
SCRIPT = ROOT / "benchmarks" / "schema_coverage.py"
MANIFEST = json.loads((CORPUS / "expect.json").read_text(encoding="utf-8"))["files"]
FILES = sorted(str(p.relative_to(CORPUS)) for p in CORPUS.rglob("*.json") if p.name != "expect.json")
TEXT = ("Ticket 4471 from Maria Keller (maria.keller@example.org), filed 2024-03-18T09:30:00Z: "
        "3 items totalling 149.90 EUR, priority high, tags shipping and refund. Zoë in 北京 called back.")
DECODES = {"greedy": {}, "sampled": {"temperature": 1.0, "seed": 0}}


def _coverage_module():
    spec = importlib.util.spec_from_file_location("schema_coverage", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


coverage = _coverage_module()


def load(rel: str):
    return json.loads((CORPUS / rel).read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def corpus_model(toy_byte_tokenizer):
    """A tiny random model over the byte-level toy tokenizer, which writes any key or value."""
    import torch

    from clover_struct.engine.config import preset
    from clover_struct.engine.model import CloverModel

    tok = toy_byte_tokenizer
    torch.manual_seed(0)
    config = preset("tiny", vocab_size=tok.vocab_size, mask_token_id=tok.mask_id, pad_token_id=tok.pad_id,
                    eos_token_id=tok.eos_id, block_size=4096, max_position_embeddings=4096)   # as clover-mini
    return CloverModel(config, tok).init_weights(std=0.02).eval()


# ---------------------------------------------------------------------------------------------
# The yardstick

CASES = [pytest.param(rel, name, id=f"{rel}-{name}",
                      marks=[pytest.mark.xfail(strict=True, raises=ExtractionError, reason=MANIFEST[rel]["gaps"][name])]
                      if name in MANIFEST[rel].get("gaps", {}) else [])
         for rel in FILES if rel.startswith("keywords/")
         for name in (DECODES if MANIFEST[rel]["expect"] == "valid" else ["greedy"])]


@pytest.mark.parametrize("rel", [rel for rel in FILES if rel.startswith("realistic/")])
def test_each_realistic_schema_lays_out(rel, corpus_model):
    """The realistic files take a minute each to decode with the tiny model (thousands of canvas
    tokens): here they are laid out and compiled; benchmarks/schema_coverage.py decodes them."""
    _, canvas, automata = prepare(load(rel), corpus_model)
    assert len(automata) == len(canvas.slots) > 0


@pytest.mark.slow
@pytest.mark.parametrize("rel, name", CASES)
def test_corpus_against_the_manifest(rel, name, corpus_model):
    schema, expected = load(rel), MANIFEST[rel]
    if expected["expect"] == "refused":
        try:
            value = extract(TEXT, schema, model=corpus_model)
        except SchemaError as e:
            assert re.search(expected["match"], str(e), re.IGNORECASE), \
                f"refused, but the message does not match /{expected['match']}/: {e}"
            return
        except Exception as e:   # noqa: BLE001 - anything else is the wrong outcome
            pytest.fail(f"expected a SchemaError matching /{expected['match']}/, got {type(e).__name__}: {e}")
        pytest.fail(f"expected a SchemaError matching /{expected['match']}/, got an instance: {value!r:.300}")
    try:
        value = extract(TEXT, schema, model=corpus_model, **DECODES[name])
    except (SchemaError, ExtractionError) as e:
        if isinstance(e, ExtractionError) and name in expected.get("gaps", {}):
            raise   # the listed gap: a clear error, the only way a gap may fail (never an invalid instance)
        pytest.fail(f"{name} decode: expected a valid instance, got {type(e).__name__}: {e}")
    why = coverage.violation(schema, value)
    assert why is None, f"{name} decode: the instance breaks the schema ({why}): {value!r:.500}"


# ---------------------------------------------------------------------------------------------
# The corpus itself

def test_the_manifest_and_the_folder_list_the_same_files():
    assert FILES == sorted(MANIFEST), (sorted(set(FILES) - set(MANIFEST)), sorted(set(MANIFEST) - set(FILES)))
    assert {f.split("/")[0] for f in FILES} == {"keywords", "realistic"}
    assert sum(f.startswith("realistic/") for f in FILES) >= 60


def _refs(node):
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref" and isinstance(value, str):
                yield value
            elif key not in ("enum", "const", "examples", "default"):
                yield from _refs(value)
    elif isinstance(node, list):
        for value in node:
            yield from _refs(value)


@pytest.mark.parametrize("rel", FILES)
def test_each_file_is_a_sound_schema_with_a_sound_expectation(rel):
    from jsonschema_specifications import REGISTRY as SPECIFICATIONS
    from referencing import Resource
    from referencing.jsonschema import specification_with

    schema, expected = load(rel), MANIFEST[rel]
    assert expected["expect"] in ("valid", "refused")
    if rel.startswith("realistic/"):
        assert expected["expect"] == "valid", "realistic schemas are all expected to be laid out"
    assert "x-expect" not in json.dumps(schema), "expectations belong in expect.json, not in the schema"
    validator = coverage.validator_for(schema)
    validator.check_schema(schema)   # the metaschema of its own draft accepts it
    if isinstance(schema, dict) and "$schema" in schema:
        meta = validator.META_SCHEMA.get("$id", validator.META_SCHEMA.get("id"))
        assert meta.rstrip("#") == schema["$schema"].rstrip("#"), "its $schema names a draft jsonschema knows"
    if expected["expect"] == "refused":
        assert expected.get("match") and re.compile(expected["match"])
        return
    # every $ref resolves within the file, or to a meta-schema jsonschema ships (the validator only
    # follows those an instance reaches)
    if isinstance(schema, dict):
        spec = specification_with(schema.get("$schema", "https://json-schema.org/draft/2020-12/schema"))
        resource = Resource.from_contents(schema, default_specification=spec)
        resolver = SPECIFICATIONS.with_resource(resource.id() or "", resource).resolver(base_uri=resource.id() or "")
        for ref in _refs(schema):
            resolver.lookup(ref)
    # satisfiable: the manifest's example is an instance of it
    assert "example" in expected, "a file expected valid needs an example instance in expect.json"
    assert coverage.violation(schema, expected["example"]) is None


def test_the_validation_is_strict_where_the_library_was_lax():
    """Outputs the issue calls silent failures are caught by the benchmark's validation."""
    v = coverage.violation
    assert v({"type": "string", "format": "date-time"}, "2024-01-01T10:00:00")        # no offset
    assert v({"type": "string", "format": "date-time"}, "2024-01-01T10:00:00Z") is None
    assert v({"type": "string", "format": "time"}, "10:00:00")                         # no offset
    assert v({"type": "string", "format": "time"}, "10:00:00+02:00") is None
    assert v({"format": "email"}, "nobody") and v({"format": "ipv4"}, "1.2.3")
    assert v({"format": "hostname"}, "a..b") and v({"format": "hostname"}, "api.example.org") is None
    assert v({"format": "uri"}, "no scheme here") and v({"format": "uri"}, "https://example.org/x") is None
    assert v({"format": "uri-reference"}, "a b") and v({"format": "uri-reference"}, "../x#y") is None
    assert v({"format": "duration"}, "1D") and v({"format": "duration"}, "P1DT2H") is None
    assert v({"type": "string", "format": "date", "pattern": "^2024"}, "2023-01-01")  # pattern beside format
    assert v({"$schema": "http://json-schema.org/draft-04/schema#", "type": "number", "minimum": 0,
              "exclusiveMinimum": True}, 0)                                                # draft 4 by $schema
    assert v({"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a", "b"]}, {"a": 1})
    assert v({"$ref": "https://schemas.clover.invalid/x.json"}, 1).startswith("the validator could not check it")


# ---------------------------------------------------------------------------------------------
# benchmarks/schema_coverage.py

def run_script(*args, timeout=600):
    done = subprocess.run([sys.executable, str(SCRIPT), *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.strip().splitlines()


def test_coverage_layout_only_over_the_corpus_prints_a_table_and_a_summary():
    lines = run_script(CORPUS, "--layout-only", "--timeout", "60")
    summary = json.loads(lines[-1])
    text = "\n".join(lines[:-1])
    assert "class" in text and "laid_out" in text and "p50" in text and "layout" in text
    assert summary["mode"] == "layout-only" and summary["files"] == len(FILES) + 1
    assert summary["skipped"] == {"an object with no JSON Schema keyword (a data file?)": 1}   # expect.json
    assert set(summary["classes"]) == {"laid_out", "refused", "crash", "timeout"}
    assert sum(summary["classes"].values()) == summary["schemas"] == len(FILES)
    assert abs(sum(summary["shares"].values()) - 1) < 1e-3
    assert sum(summary["refusals"].values()) == summary["classes"]["refused"]
    assert {f: sum(c.values()) for f, c in summary["by_folder"].items()} == \
        {f: sum(x.startswith(f + "/") for x in FILES) for f in ("keywords", "realistic")}
    assert len(summary["crashes"]) == summary["classes"]["crash"]
    assert summary["times"]["total"]["n"] == len(FILES) - summary["classes"]["timeout"]


def test_coverage_full_run_classifies_and_skips_with_reasons(tmp_path):
    (tmp_path / "nested").mkdir()
    (tmp_path / "plain.json").write_text(json.dumps(
        {"type": "object", "properties": {"name": {"type": "string", "maxLength": 8}, "n": {"type": "integer"}},
         "required": ["name", "n"]}))
    (tmp_path / "nested" / "remote.json").write_text(json.dumps(
        {"type": "object", "properties": {"a": {"$ref": "https://schemas.clover.invalid/a.json"}}, "required": ["a"]}))
    (tmp_path / "nested" / "sibling.json").write_text(json.dumps(   # read with the file it names
        {"type": "object", "properties": {"name": {"$ref": "../plain.json#/properties/name"}}, "required": ["name"]}))
    (tmp_path / "broken.json").write_text("{not json")
    (tmp_path / "cases.json").write_text(json.dumps([{"description": "a test-case file", "schema": {}, "tests": []}]))
    (tmp_path / "data.json").write_text(json.dumps({"name": "a data file", "version": 3}))
    (tmp_path / "bad_schema.json").write_text(json.dumps({"type": "strnig"}))
    (tmp_path / "notes.txt").write_text("not a .json file: not read")
    lines = run_script(tmp_path, "--json", "--timeout", "120", "--text", "Alice Brown, 42 items.")
    records = [json.loads(line) for line in lines]
    summary = records[-1]
    assert summary["files"] == 7 and summary["schemas"] == 3
    assert sum(summary["classes"].values()) == 3 and set(summary["classes"]) == set(coverage.CLASSES)
    assert summary["skipped"] == {"not JSON": 1, "a JSON array, not a schema (a test-case file?)": 1,
                                  "an object with no JSON Schema keyword (a data file?)": 1,
                                  "rejected by its draft's metaschema (SchemaError)": 1}
    by_file = {r["file"]: r for r in records[:-1]}
    assert by_file["nested/remote.json"]["class"] == "refused"   # a remote $ref: refused today and tomorrow
    assert by_file["plain.json"]["class"] in coverage.CLASSES
    assert by_file["nested/sibling.json"]["class"] in set(coverage.CLASSES) - {"refused"}
    assert "skipped" in by_file["broken.json"]
    assert summary["times"]["layout"]["n"] >= 1


def test_coverage_timeouts_kill_the_worker_and_the_run_goes_on(tmp_path):
    for k in range(2):
        (tmp_path / f"s{k}.json").write_text(json.dumps(
            {"type": "object", "properties": {f"f{i}": {"type": "string", "pattern": f"^[A-Z]{{{i + 1}}}$"}
                                              for i in range(40)}}))
    summary = json.loads(run_script(tmp_path, "--layout-only", "--timeout", "0.001")[-1])
    assert sum(summary["classes"].values()) == 2
    timeouts = summary["classes"]["timeout"]
    assert len(summary["timeouts"]) == timeouts
    # a fresh worker (one more model load) after each timeout that another schema followed
    assert len(summary["model_load_seconds"]) == 1 + timeouts - (summary["timeouts"][-1:] == ["s1.json"])
