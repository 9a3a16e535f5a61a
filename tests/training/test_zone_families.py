"""Every zone family's notices read back to what the generator drew, through the schema's
own readers: the gold validates as a NoFlyZone, each copied value is a piece of the text
(where a verbatim slot can start and end), and its read values (degrees, metres, UTC times)
equal the generator's own arithmetic on the digits it wrote (notation.Meant)."""

import re

import pytest

from clover_struct.engine.tokenizer import Tokenizer
from clover_struct.schema_walk import build_canvas
from clover_struct.schemas.airspace import NoFlyZone
from training.families import KIND_FAMILIES, NO_ZONE
from training.generate import zone_case
from training.model_card import SHIPPED
from training.notation import normal

ZONE_FAMILIES = KIND_FAMILIES["zone"]
SEEDS = range(150)


def pieces(gold: NoFlyZone) -> list[str]:
    """Every verbatim value of the record."""
    out = [gold.notam_id, gold.floor, gold.ceiling, gold.valid_from_raw, gold.valid_to_raw, gold.schedule, gold.reason]
    if gold.area is not None:
        points = [gold.area.center] if gold.area.kind == "circle" else gold.area.vertices
        out += [x for p in points for x in (p.lat, p.lon)]
        if gold.area.kind == "circle":
            out.append(gold.area.radius)
    return [p for p in out if p is not None]


def _kind(c: str) -> int:
    return 1 if c.isascii() and c.isdigit() else 2 if c.isascii() and c.isalpha() else 0


def copyable(piece: str, text: str) -> bool:
    """Is `piece` in the text as verbatim slots read it (whitespace runs as one space), starting
    and ending at a word edge (not inside a run of ASCII digits or of letters)?"""
    for m in re.finditer(re.escape(piece), text):
        a, b = m.start(), m.end()
        start_ok = a == 0 or _kind(text[a - 1]) != _kind(text[a]) or _kind(text[a]) == 0
        end_ok = b == len(text) or _kind(text[b - 1]) != _kind(text[b]) or _kind(text[b]) == 0
        if start_ok and end_ok:
            return True
    return False


def approx_points(a, b):
    assert len(a) == len(b)
    for p, q in zip(a, b):
        assert p == pytest.approx(q, abs=1e-9)


@pytest.fixture(scope="module", params=ZONE_FAMILIES)
def drawn(request):
    return request.param, [zone_case(seed, request.param) for seed in SEEDS]


def test_gold_validates_and_round_trips(drawn):
    family, cases = drawn
    for text, gold, _ in cases:
        assert NoFlyZone.model_validate(gold.model_dump(mode="json")) == gold, (family, text)


def test_every_copied_value_is_a_piece_of_the_text(drawn):
    family, cases = drawn
    for text, gold, _ in cases:
        flat = normal(text)
        for piece in pieces(gold):
            assert copyable(piece, flat), (family, piece, text)


def test_every_value_fits_its_slot_in_the_shipped_models_canvas(drawn):
    """Over its slot's budget a value can be neither written by the decoder nor trained on
    (training skips the row): at 24 tokens a time and 12 a radius, 17% of FAA TFRs were
    (`0615 UTC SEPTEMBER 30, 2036` takes 29 of clover-mini's tokens, `0.5 NAUTICAL MILES` 20)."""
    family, cases = drawn
    canvas = build_canvas(NoFlyZone, Tokenizer.from_file(SHIPPED / "tokenizer.json"))
    for _, gold, _ in cases:
        canvas.fill(gold)   # ValueError names the field and its length


def test_read_values_equal_what_was_drawn(drawn):
    family, cases = drawn
    for text, gold, meant in cases:
        why = (family, text)
        assert gold.defines_zone == (meant.kind is not None), why
        if meant.kind == "circle":
            assert gold.area.kind == "circle", why
            assert (gold.center_lat, gold.center_lon) == pytest.approx(meant.center, abs=1e-9), why
            assert gold.radius_m == pytest.approx(meant.radius_m, rel=1e-12), why
        elif meant.kind == "polygon":
            assert gold.area.kind == "polygon", why
            approx_points(gold.polygon, meant.vertices)
        if meant.kind is not None:
            shape = gold.footprint()
            assert shape.is_valid and shape.area > 0, why
        assert (gold.floor_m, gold.floor_ref) == (pytest.approx(meant.floor_m, abs=1e-9), meant.floor_ref), why
        assert gold.ceiling_ref == meant.ceiling_ref, why
        assert gold.ceiling_m == (None if meant.ceiling_m is None else pytest.approx(meant.ceiling_m, abs=1e-9)), why
        assert (gold.valid_from, gold.valid_to) == (meant.valid_from, meant.valid_to), why


@pytest.mark.parametrize("family", NO_ZONE)
def test_no_zone_families_say_so(family):
    for seed in SEEDS:
        text, gold, _ = zone_case(seed, family)
        assert gold.area is None and not gold.defines_zone and gold.reason is None, text
        assert not gold.contains(0.0, 0.0, 0.0, __import__("datetime").datetime(2030, 1, 1, tzinfo=__import__(
            "datetime").timezone.utc))
        if family == "zone_garbage":
            assert gold == NoFlyZone(uas_only=False)


def test_range_notices_use_every_notation_and_ending():
    texts, golds, lines = [], [], set()
    for seed in range(400):
        text, gold, _ = zone_case(seed, "zone_range")
        texts.append(normal(text))
        golds.append(gold)
        lines.update(line.strip() for line in text.splitlines())
    lats = [v.lat for g in golds for v in g.area.vertices]
    assert any(re.fullmatch(r"[NS]\d{6}", x) for x in lats)                 # N354800E0982500
    assert any(re.fullmatch(r"[NS]\d{4}", x) for x in lats)                 # N2609E11430
    assert any(re.fullmatch(r"\d{6}[NS]", x) for x in lats)                 # 253000N 1213000E
    assert any(re.fullmatch(r"\d{4}[NS]", x) for x in lats)                 # 2232S 08521E
    assert any(re.fullmatch(r"[NS] ?\d\d \d\d \d\d", x) for x in lats)      # S05 59 00 E090 05 00
    assert any(re.fullmatch(r"[NS]\d+ \d+", x) for x in lats)               # N35 0047: cut by a line end
    assert any(re.fullmatch(r"[NS]\d{4} [EW]\d{5}", x) for x in lines)       # N4310 E12329, a pair a line
    assert any(re.search(r"\d{4}[NS] ?\d{5}[EW], \d{4}[NS]", t) for t in texts)  # 1530S15012E, 1610S...
    assert any("INFO RECEIVED FROM" in t or "AS ADVISED BY" in t for t in texts)
    assert any("WILL BE CONDUCTED BY" in t and "FALL AREA FOR" in t for t in texts)
    assert any("BACK TO START" in t for t in texts)
    assert any(g.area.vertices[0] == g.area.vertices[-1] for g in golds)   # a closing repeat
    counts = [len(g.polygon) for g in golds]
    assert min(counts) == 3 and max(counts) > 20 and counts.count(4) > 100
    assert any(lat.startswith("S") or lat.endswith("S") for lat in lats)


def test_lowercase_and_local_clock_variants_appear():
    lower = [zone_case(seed, "zone_range") for seed in range(200)]
    assert any(t == t.lower() for t, _, _ in lower)
    zh = [zone_case(seed, "drone_zh") for seed in range(100)]
    assert {g.utc_offset_hours for _, g, _ in zh} == {0.0, 8.0} and any("北京时间" in t for t, _, _ in zh)
    assert any(re.search("内，真高[0-9.]+米以下设立", t) for t, _, _ in zh)   # the height set off, joined to the ban
    en = [zone_case(seed, "drone_en_prose") for seed in range(100)]
    assert len({g.utc_offset_hours for _, g, _ in en}) > 5
