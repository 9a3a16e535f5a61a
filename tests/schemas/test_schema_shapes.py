"""Every schema uses only what the decoder can lay out, describes every field, and bounds
every free string (pattern, max_length or a format), every list (max_length)."""

import pytest

from clover_struct.schemas import DispatchJudgments, DispatchMessage, NoFlyZone, Notam

SCALARS = {"string", "integer", "number", "boolean", "null"}


def variants(spec: dict):
    for key in ("anyOf", "oneOf"):
        if key in spec:
            for v in spec[key]:
                yield from variants(v)
            return
    yield spec


def check(path: str, spec: dict, problems: list[str]):
    for v in variants(spec):
        if "$ref" in v or "const" in v or "enum" in v:
            continue
        kind = v.get("type")
        if kind == "array":
            if "maxItems" not in v:
                problems.append(f"{path}: list without max_length")
            check(f"{path}[]", v["items"], problems)
        elif kind == "string" and not ({"pattern", "maxLength", "format"} & v.keys()):
            problems.append(f"{path}: unbounded string")
        elif kind not in SCALARS and kind != "array":
            problems.append(f"{path}: unsupported type {kind!r}")


@pytest.mark.parametrize("model", [Notam, NoFlyZone, DispatchMessage, DispatchJudgments])
def test_schema_shape(model):
    schema = model.model_json_schema()
    problems: list[str] = []
    for name, sub in [("<root>", schema), *schema.get("$defs", {}).items()]:
        if "enum" in sub:  # an Enum's own definition
            continue
        for field, spec in sub.get("properties", {}).items():
            if not spec.get("description"):
                problems.append(f"{name}.{field}: no description")
            check(f"{name}.{field}", spec, problems)
    assert not problems, "\n".join(problems)
