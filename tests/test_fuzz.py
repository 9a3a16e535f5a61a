"""Fuzzing the boundary: whatever the text, `extract`, `extract_many`, `decide` and the CLI give
instances of the schema or CloverErrors, never another exception, and no InternalError either
(the API turns a crash inside one record's decoding into that record's InternalError, so a
crash shows up here as one).

Texts: arbitrary Unicode (lone surrogates included), bytes decoded every way a caller might
(UTF-8 with replacement, Latin-1), control characters, bidi marks, byte order marks, mixed
scripts, 20,000-character texts, and the real dev notices of ../shared/data truncated and
case-changed (read there at test time, never copied; that part is skipped where the file is
absent). Schemas: the shipped ones (Notam, NoFlyZone, DispatchMessage; DispatchJudgments for
decide). Models: tiny random models over clover-mini's own tokenizer, so the shipped schemas
lay out as they do for clover-mini: one confidently wrong (std 1.0), one near uniform (std 0.02,
decoded with threshold 0 so that a record takes a few steps, not hundreds).

The default run draws a few examples of each (derandomized, so it is the same every time);
`--slow` runs the long suite with fresh random draws.
"""

import json
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import clover_struct
from clover_struct import (CloverError, ExtractionError, InternalError, batch_io, cli, decide, extract, extract_many,
                           predicate)
from clover_struct.engine.checkpoint import save_model
from clover_struct.engine.tokenizer import Tokenizer
from clover_struct.schemas import DispatchJudgments, DispatchMessage, NoFlyZone, Notam, judgment_rules_hold
from tiny_models import tiny_model

TOKENIZER = Path(clover_struct.__file__).parent / "models" / "clover-mini" / "tokenizer.json"
DEV = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "notams-dev.jsonl"
SCHEMAS = [Notam, NoFlyZone, DispatchMessage]

BIDI = "\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u061c"
PIECES = ["A1234/26 NOTAMN", "Q) EGTT/QRDCA/IV/BO/W/000/050/5130N00045W005", "B) 2607010800 C) PERM",
          "F) SFC G) 5000FT AMSL", "禁止无人机飞行", "半径 500 米", "Запрет полётов", "حظر الطيران", "ドローン",
          "🚁✈️", "Zoë", "31.2150, 121.4700", "800 m", "\ufeff", "\x00", "\x1b[31m", "\r\n", "\t", "\u2028", "\\",
          '"', "{}", "null", " ", *BIDI]


def real_notices() -> list[str]:
    if not DEV.is_file():
        return []
    with open(DEV, encoding="utf-8") as f:
        return [json.loads(line)["text"] for line in f if line.strip()]


def mutated(notices):
    """A real notice cut at a drawn point and/or with its case changed."""
    case = st.sampled_from([str, str.lower, str.upper, str.swapcase, str.title, str.casefold])
    return st.builds(lambda text, cut, change: change(text[:cut]), st.sampled_from(notices),
                     st.integers(0, 3000), case)


TEXTS = st.one_of(
    st.text(st.characters(codec=None, exclude_categories=()), max_size=200),      # any code point, surrogates too
    st.binary(max_size=200).map(lambda b: b.decode("utf-8", "replace")),
    st.binary(max_size=200).map(lambda b: b.decode("latin-1")),
    st.lists(st.sampled_from(PIECES), max_size=30).map("".join),
    st.lists(st.sampled_from(PIECES), min_size=1, max_size=5).map(lambda p: ("".join(p) * 20_000)[:20_000]),
)


@pytest.fixture(scope="module")
def tokenizer():
    return Tokenizer.from_file(TOKENIZER)


@pytest.fixture(scope="module")
def models(tokenizer):
    """(model, threshold) settings: confidently wrong and greedy; near uniform, committing every position."""
    wrong = tiny_model(tokenizer, std=1.0, seed=0, block_size=4096, max_position_embeddings=4096)
    flat = tiny_model(tokenizer, std=0.02, seed=1, block_size=4096, max_position_embeddings=4096)
    return [(wrong, 0.9), (wrong, 0.0), (flat, 0.0)]


HEALTH = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture,
          HealthCheck.large_base_example]


def fuzz(examples: int, slow_examples: int, **strategies):
    """Two tests from one property: a few fixed draws by default, many fresh ones with --slow."""
    def wrap(prop):
        quick = settings(max_examples=examples, deadline=None, derandomize=True, suppress_health_check=HEALTH,
                         database=None)(given(**strategies)(prop))
        slow = settings(max_examples=slow_examples, deadline=None, suppress_health_check=HEALTH)(
            given(**strategies)(prop))
        return quick, pytest.mark.slow(slow)
    return wrap


def check(value, schema):
    assert isinstance(value, (schema, CloverError)), f"{type(value).__name__}: {value!r}"[:300]
    assert not isinstance(value, InternalError), repr(value.__cause__)


def extract_any(text, schema, setting, truncate):
    model, threshold = setting
    try:
        value = extract(text, schema, model=model, threshold=threshold, truncate=truncate)
    except CloverError as e:
        value = e
    check(value, schema)


def _extract(models, text, schema, which, truncate):
    extract_any(text, schema, models[which], truncate)


test_extract_gives_an_instance_or_a_clover_error, test_extract_fuzzed_long = fuzz(
    6, 100, text=TEXTS, schema=st.sampled_from(SCHEMAS), which=st.integers(0, 2), truncate=st.booleans())(_extract)


def _extract_many(models, texts, schema, which):
    model, threshold = models[which]
    got = extract_many(texts, schema, model=model, threshold=threshold, truncate=True, batch_size=4)
    assert len(got) == len(texts)
    for value in got:
        assert isinstance(value, (schema, ExtractionError)), repr(value)[:300]
        check(value, schema)


test_extract_many_gives_each_record_or_its_error, test_extract_many_fuzzed_long = fuzz(
    3, 30, texts=st.lists(TEXTS, min_size=1, max_size=4), schema=st.sampled_from(SCHEMAS),
    which=st.integers(0, 2))(_extract_many)


JUDGMENTS = [k for k in DispatchJudgments.model_fields if k != "action"]


def _decide(models, text, which, known):
    model, _ = models[which]
    try:
        value = decide(text, DispatchJudgments, model=model, rules=[predicate(judgment_rules_hold)], known=known)
    except CloverError as e:
        return check(e, DispatchJudgments)
    assert isinstance(value, DispatchJudgments) and judgment_rules_hold(value)
    assert all(getattr(value, k) == v for k, v in known.items())


test_decide_gives_an_answer_or_a_clover_error, test_decide_fuzzed_long = fuzz(
    10, 200, text=TEXTS, which=st.integers(0, 2),
    known=st.dictionaries(st.sampled_from(JUDGMENTS), st.booleans(), max_size=3))(_decide)


@pytest.mark.skipif(not DEV.is_file(), reason=f"the real dev notices are not here ({DEV})")
@settings(max_examples=6, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_real_notices_cut_and_case_changed(models, data):
    text = data.draw(mutated(real_notices()))
    extract_any(text, data.draw(st.sampled_from(SCHEMAS)), models[data.draw(st.integers(0, 2))], truncate=True)


@pytest.fixture(scope="module")
def model_dir(tokenizer, tmp_path_factory):
    return str(save_model(tiny_model(tokenizer, std=1.0, seed=2, block_size=4096, max_position_embeddings=4096),
                          tmp_path_factory.mktemp("fuzz-model")))


FILES = st.lists(st.tuples(st.sampled_from([".txt", ".md", ".jsonl"]), st.one_of(
    st.binary(max_size=300),
    TEXTS.map(lambda t: t.encode("utf-8", "surrogatepass")),
    st.lists(TEXTS.map(lambda t: json.dumps({"text": t})), max_size=4).map(lambda rows: "\n".join(rows).encode()),
)), min_size=1, max_size=5)


def _cli(model_dir, capsys, files, schema):
    with tempfile.TemporaryDirectory() as d:
        folder = Path(d, "in")
        folder.mkdir()
        for n, (suffix, data) in enumerate(files):
            (folder / f"f{n}{suffix}").write_bytes(data)
        out = Path(d, "out.jsonl")
        expected = batch_io.count([folder], exclude=())
        code = cli.main(["extract", str(folder), "--schema", f"clover_struct.schemas.{schema}", "--model", model_dir,
                         "-o", str(out), "--quiet"])
        err = capsys.readouterr().err
        assert code in (0, 1) and "Traceback" not in err, err[-2000:]
        errors = Path(d, "out.errors.jsonl")
        written = [json.loads(line) for p in (out, errors) if p.exists() for line in p.read_text().splitlines()]
        assert len(written) == expected and (code == 1) == errors.exists()
        assert not any("a bug in clover-struct" in row.get("error", "") for row in written)


test_cli_accounts_for_every_file, test_cli_fuzzed_long = fuzz(
    3, 20, files=FILES, schema=st.sampled_from(["notam:Notam", "airspace:NoFlyZone", "dispatch:DispatchMessage"]))(_cli)
