"""benchmarks/compare.py end to end, on a tiny random diffusion model and a tiny random twin.

The models know nothing, so the scores mean nothing: what is checked is that every variant
runs on the same notices, yields records or counted failures, and counts what it claims.
"""

import contextlib
import io
import json
from typing import Literal

import pytest
import torch
from pydantic import BaseModel, Field

from clover_struct import ExtractionError
from clover_struct.engine.checkpoint import save_model
from clover_struct.engine.config import preset
from clover_struct.engine.model import CloverModel
from clover_struct.engine.tokenizer import Tokenizer
from clover_struct.schema_walk import build_canvas
from clover_struct.schemas import Notam
from training.evaluate import REAL_DEV
from training.generate import examples
from training.tokenizer import corpus, train_tokenizer

pytest.importorskip("outlines", reason="outlines is a bench and test extra: pip install -e .[test]")
from benchmarks import compare  # noqa: E402
from benchmarks.twin import EngineTwin, OutlinesTwin  # noqa: E402

KEYS = {"n", "field_em", "forward_passes_per_record", "tokens_per_forward", "seconds_per_record", "valid_rate",
        "peak_mb"}

pytestmark = pytest.mark.slow   # runs the benchmark end to end: a minute on 2 cores


def tiny(tok, seed, std):
    torch.manual_seed(seed)
    config = preset("tiny", vocab_size=tok.vocab_size, mask_token_id=tok.mask_id, pad_token_id=tok.pad_id,
                    eos_token_id=tok.eos_id, block_size=64)
    return CloverModel(config, tok).init_weights(torch.Generator().manual_seed(seed), std=std).eval()


@pytest.fixture(scope="module")
def dirs(tmp_path_factory):
    root = tmp_path_factory.mktemp("bench")
    tok = Tokenizer(train_tokenizer(corpus(per_kind=30), vocab_size=600))
    save_model(tiny(tok, 0, 0.5), root / "clover")   # 64-token blocks: a Notam canvas is several
    save_model(tiny(tok, 1, 0.1), root / "twin", model_type="qwen3_5_moe_text")
    return root / "clover", root / "twin"


@pytest.fixture(scope="module")
def run(dirs):
    """compare's main on 2 generated notices (+ 1 real one where ../shared/data has it):
    the JSON line, the printed lines and every decoded value, variant after variant."""
    seen, out = [], io.StringIO()
    matches = compare.matches
    with pytest.MonkeyPatch.context() as mp, contextlib.redirect_stdout(out):
        mp.setattr(compare, "matches", lambda value, notice: seen.append(value) or matches(value, notice))
        assert compare.main(["--model", str(dirs[0]), "--twin", str(dirs[1]), "--n", "2", "--real", "1",
                             "--device", "cpu"]) == 0
    lines = out.getvalue().splitlines()
    return json.loads(lines[-1]), lines, seen


def test_the_json_line_has_every_variant_and_key(run):
    report, lines, _ = run
    assert set(report["variants"]) == set(compare.VARIANTS)
    real = REAL_DEV.is_file()
    assert report["n"] == 2 and report["real_n"] == int(real)
    for name, r in report["variants"].items():
        assert r["n"] == 2 + real, name
        assert KEYS | ({"real_dev_field_em"} if real else set()) == set(r), name
        assert 0 <= r["field_em"] <= 1 and 0 <= r["valid_rate"] <= 1, name
        assert r["seconds_per_record"] > 0 and r["peak_mb"] > 0, name
    for key in ("speedup_vs_outlines", "forward_pass_ratio_vs_outlines"):
        assert report[key] > 0
    assert 0 < report["constraint_share"] < 1
    table = "\n".join(lines)
    assert all(f"| {name} |" in table for name in compare.VARIANTS)


def test_every_output_is_a_record_or_a_counted_failure(run):
    report, _, seen = run
    per_variant = report["n"] + report["real_n"]
    assert len(seen) == len(compare.VARIANTS) * per_variant
    assert all(isinstance(v, (Notam, ExtractionError)) for v in seen)
    for k, name in enumerate(compare.VARIANTS):   # measured one variant after another
        valid = sum(isinstance(v, Notam) for v in seen[k * per_variant:(k + 1) * per_variant])
        assert report["variants"][name]["valid_rate"] == valid / per_variant, name


def test_quick_decodes_fewer_notices_one_token_per_step(dirs, monkeypatch):
    """--quick: every variant on the same notices, but the one-token ablation on the first few."""
    notices = compare.notices
    monkeypatch.setattr(compare, "notices", lambda *args: notices(*args)[:2])   # 2 of --quick's 20
    monkeypatch.setattr(compare, "QUICK_ONE_TOKEN", 1)
    with contextlib.redirect_stdout(out := io.StringIO()):
        assert compare.main(["--model", str(dirs[0]), "--twin", str(dirs[1]), "--quick", "--device", "cpu"]) == 0
    report = json.loads(out.getvalue().splitlines()[-1])
    assert report["n"] == 2 and report["real_n"] == 0
    assert {name: r["n"] for name, r in report["variants"].items()} == {
        name: 1 if name == "one_token_per_step" else 2 for name in compare.VARIANTS}
    assert "| one_token_per_step | 1 |" in out.getvalue()


def test_forward_passes_count_what_each_variant_does(run, dirs):
    from clover_struct import load_model

    v = run[0]["variants"]
    joint = v["clover_joint"]["forward_passes_per_record"]
    assert v["one_token_per_step"]["forward_passes_per_record"] >= joint
    # (fields_sequential is not compared: on a random model the schedules decide a Notam's
    # optional parts differently, so either may write more; test_decoder orders the
    # schedules on a schema without optional parts)
    # the same passes over several blocks: cached, each block's first step also encodes the
    # prompt or the blocks before it; uncached, every step encodes them again
    blocks = -(-len(build_canvas(Notam, load_model(dirs[0]).tokenizer)) // 64)
    # (means over records: compared as floats)
    assert blocks > 1 and v["no_prefix_cache"]["forward_passes_per_record"] == pytest.approx(joint)
    assert v["clover_joint"]["tokens_per_forward"] > 1
    assert v["one_token_per_step"]["tokens_per_forward"] <= v["clover_joint"]["tokens_per_forward"]
    for name in ("engine_ar_twin", "outlines_ar_twin"):
        assert v[name]["tokens_per_forward"] == 1.0 and v[name]["forward_passes_per_record"] > 10


class Code(BaseModel):
    """ASCII values only. Outlines turns each token into text with the tokenizer's
    convert_tokens_to_string, so a byte-level token that is part of a UTF-8 character
    becomes U+FFFD; our vocabulary keeps its bytes. Where values are ASCII the two allow
    exactly the same tokens (outlines-core's \\d also matches non-ASCII digits, which a
    random twin happily writes)."""

    station: str = Field(pattern=r"^[A-Z]{4}$")
    level: int
    kind: Literal["N", "R", "C"]
    closed: bool


def test_our_engine_and_outlines_write_the_same_twin_tokens(dirs):
    """Same weights, same regex (whitespace ""), greedy: the framework must not change the output."""
    from clover_struct import load_model

    twin = load_model(dirs[1])
    canvas = build_canvas(Code, twin.tokenizer)
    ours = EngineTwin(twin, Code, canvas, max_tokens=64)
    theirs = OutlinesTwin(dirs[1], twin.tokenizer, Code, canvas, 64, "cpu", torch.float32, whitespace="")
    texts = [text for text, _ in examples("notam", 3, 7)]
    theirs.prepare(texts)
    for text in texts:
        value, forwards, tokens = ours(text)
        their_value, their_forwards, _ = theirs(text)
        assert ours.text == theirs.text and ours.text.startswith('{"station":"')
        assert forwards == their_forwards == tokens and repr(value) == repr(their_value)
