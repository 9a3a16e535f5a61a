"""Linked judgments decided jointly never break their rules; answering alone can."""

from typing import ClassVar, Literal

import pytest
from pydantic import AliasChoices, BaseModel, ConfigDict, Field, field_serializer, field_validator, model_validator

from clover_struct import ExtractionError, SchemaError, UsageError
from clover_struct.linked import decide, exactly_one, excludes, implies, predicate
from clover_struct.schemas.dispatch import Action, DispatchJudgments, judgment_rules_hold
from tiny_models import tiny_model, without_prefill_step


class Triage(BaseModel):
    urgent: bool
    safe: bool
    lane: Literal["left", "right", "hold"]
    rules: ClassVar[list] = [implies("urgent", "lane=left"), excludes("urgent", "safe"),
                             exactly_one("safe", "urgent", "lane=hold")]


@pytest.mark.parametrize("seed", range(6))
def test_joint_answers_satisfy_every_rule(toy_tokenizer, seed):
    model = tiny_model(toy_tokenizer, seed=seed, std=1.0)
    j = decide(f"case {seed}", DispatchJudgments, model=model, rules=[predicate(judgment_rules_hold)])
    assert judgment_rules_hold(j)
    t = decide(f"case {seed}", Triage, model=model)
    assert all(r.holds(t.model_dump(mode="json")) for r in Triage.rules)


def test_answering_alone_can_contradict(toy_tokenizer):
    broken = 0
    for seed in range(8):
        alone = decide("x", DispatchJudgments, model=tiny_model(toy_tokenizer, seed=seed, std=1.0), joint=False)
        broken += not judgment_rules_hold(alone)
    assert broken > 0  # a random model answering each question alone breaks the rules


def test_known_facts_are_kept(toy_tokenizer):
    model = tiny_model(toy_tokenizer, std=1.0)
    j, trace = decide("x", DispatchJudgments, model=model, rules=[predicate(judgment_rules_hold)],
                      known={"crosses_zone": False}, trace=True)
    assert j.crosses_zone is False and not j.conflict and j.action == Action.PROCEED
    assert trace.forward_passes == 1 and trace.steps == 1   # prompt and step in one pass


def test_the_model_reads_the_known_facts_as_training_writes_them(toy_tokenizer, monkeypatch):
    from clover_struct.api import prepare

    model = tiny_model(toy_tokenizer, std=1.0)
    seen, step = [], model.prefill_step
    spy = lambda history, block, *a, **k: seen.append(block[0].tolist()) or step(history, block, *a, **k)  # noqa: E731
    monkeypatch.setattr(model, "prefill_step", spy)
    known = {"conflict": True, "action": Action.REROUTE}
    decide("x", DispatchJudgments, model=model, known=known)
    canvas = prepare(DispatchJudgments, model)[1]
    filled = canvas.fill({s.path: False for s in canvas.slots} | {"conflict": True, "action": "reroute"})
    for s in canvas.slots:   # known: the tokens canvas.fill writes (the training target); the rest masked
        want = filled[s.start:s.end] if s.path in known else [model.config.mask_token_id] * s.budget
        assert seen[0][s.start:s.end] == want, s.path


def test_unsatisfiable_rules_and_too_many_fields(toy_tokenizer):
    model = tiny_model(toy_tokenizer)
    with pytest.raises(ExtractionError, match="no answer satisfies every rule"):
        decide("x", Triage, model=model, rules=[implies("urgent", "safe"), excludes("urgent", "safe"),
                                                implies("safe", "urgent"), exactly_one("safe", "urgent")])
    many = type("Many", (BaseModel,), {"__annotations__": {f"q{i}": bool for i in range(9)}})
    with pytest.raises(SchemaError, match="9 linked fields; decide answers at most 8"):
        decide("x", many, model=model)

    class NotJudgment(BaseModel):
        ok: bool
        name: str

    with pytest.raises(SchemaError, match="`name`.*bool, Literal or Enum"):
        decide("x", NotJudgment, model=model)


def test_what_decide_cannot_take_is_named(toy_tokenizer):
    model = tiny_model(toy_tokenizer)
    with pytest.raises(SchemaError, match="no fields to decide"):
        decide("x", type("Nothing", (BaseModel,), {}), model=model)
    optional = {"type": "object", "properties": {"urgent": {"type": "boolean"}}}
    with pytest.raises(SchemaError, match="`urgent`: judgments are required bool"):
        decide("x", optional, model=model)
    with pytest.raises(UsageError, match="exactly_one takes two terms or more, got 0"):
        exactly_one()

    class Refused(Triage):
        @model_validator(mode="after")
        def never(self):
            raise ValueError("no combination")
    with pytest.raises(ExtractionError, match=r"exactly one of safe, urgent, lane=hold\) and the schema's own"):
        decide("x", Refused, model=model, rules=[])   # the class's rules hold beside those given

    class Inner(BaseModel):
        a: bool = False

    class Nested(BaseModel):
        x: bool
        inner: Inner = Inner()
    with pytest.raises(SchemaError, match="`inner.a`: judgments are required bool.*not inside objects"):
        decide("x", Nested, model=model, known={"inner.a": True})

    class OneRule(BaseModel):
        rules: ClassVar = implies("urgent", "safe")
        urgent: bool
        safe: bool
    with pytest.raises(UsageError, match="the model's `rules` takes a list of rules"):
        decide("x", OneRule, model=model)
    with pytest.raises(UsageError, match="not 1"):
        implies(1, "safe")
    with pytest.raises(UsageError, match="known: 1 is not a value of `urgent`"):
        decide("x", Triage, model=model, known={"urgent": 1})   # 1 == True, but no bool


def test_a_rule_that_raises_is_named_with_what_it_was_given(toy_tokenizer):
    """A predicate is given the validated instance: the message had shown the record's dict."""
    model = tiny_model(toy_tokenizer)
    with pytest.raises(UsageError, match=r"rule `<lambda>` raised TypeError: .*called with the validated Triage "
                                         r"Triage\(urgent="):
        decide("x", Triage, model=model, rules=[lambda r: r["nope"]])


class Rewritten(BaseModel):
    urgent: bool
    escalate: bool

    @field_validator("urgent")
    @classmethod
    def _always(cls, v):
        return True


def test_the_rules_hold_of_the_answer_as_validated(toy_tokenizer):
    """A validator that rewrites an answer cannot make the returned record break a rule."""
    model = tiny_model(toy_tokenizer)
    with pytest.raises(ExtractionError, match="no answer satisfies every rule"):
        decide("x", Rewritten, model=model, rules=[implies("urgent", "escalate")], known={"escalate": False})
    assert decide("x", Rewritten, model=model, rules=[implies("urgent", "escalate")]) == Rewritten(urgent=True,
                                                                                                 escalate=True)


class Aliased(BaseModel):
    urgent: bool = Field(validation_alias="isUrgent", serialization_alias="URGENT")
    escalate: bool = Field(validation_alias=AliasChoices("escalate", "esc"), serialization_alias="ESCALATE")


@pytest.mark.parametrize("seed", range(3))
def test_rules_on_aliased_fields_hold(toy_tokenizer, seed):
    """Rules name a field as its records do (the validation alias); they had been checked on the
    serialized names, so every rule on such a field held and was broken."""
    model = tiny_model(toy_tokenizer, seed=seed, std=1.0)
    answer = decide("x", Aliased, model=model, rules=[implies("isUrgent", "escalate")], known={"isUrgent": True})
    assert answer.urgent and answer.escalate
    with pytest.raises(ExtractionError, match="no answer satisfies every rule"):
        decide("x", Aliased, model=model, rules=[implies("isUrgent", "escalate"), excludes("isUrgent", "escalate")],
               known={"isUrgent": True})


class Hidden(BaseModel):
    model_config = ConfigDict(serialize_by_alias=True)

    urgent: bool = Field(exclude=True)
    lane: Literal["left", "right"] = Field(alias="Lane")

    @field_serializer("lane")
    def _upper(self, v):
        return v.upper()


def test_rules_read_the_values_as_validated_not_as_serialized(toy_tokenizer):
    """An excluded field, a serializer and serialize_by_alias change the dump, not the answer: the
    rules had read the dump, so a known answer that keeps them was refused."""
    model = tiny_model(toy_tokenizer)
    rules = [implies("urgent", "Lane=right")]
    assert decide("x", Hidden, model=model, rules=rules, known={"urgent": True, "Lane": "right"}) == \
        Hidden(urgent=True, Lane="right")
    assert decide("x", Hidden, model=model, rules=rules, known={"urgent": True}).lane == "right"


BOTH = {"type": "object", "properties": {"a": {"type": "boolean"}, "b": {"type": "boolean"}}, "required": ["a", "b"]}


@pytest.mark.parametrize("joint", [True, False])
def test_a_json_schemas_own_checks_hold_of_the_answer(toy_tokenizer, joint):
    """if/then and not are checked as extract checks them (decide had returned {a: true, b: false}
    for a schema whose `then` requires b)."""
    import jsonschema

    model = tiny_model(toy_tokenizer)
    then = {**BOTH, "if": {"properties": {"a": {"const": True}}}, "then": {"properties": {"b": {"const": True}}}}
    never = {**BOTH, "not": {"properties": {"a": {"const": True}, "b": {"const": True}}}}
    for schema in (then, never):
        for known in ({"a": True}, {"b": True}):
            try:
                answer = decide("x", schema, model=model, known=known, joint=joint)
            except ExtractionError as e:
                assert not joint and "break the schema's own checks" in str(e)
                continue
            jsonschema.validate(answer, schema)
            assert all(answer[k] == v for k, v in known.items())
    with pytest.raises(ExtractionError, match="no answer satisfies every rule"):
        decide("x", never, model=model, known={"a": True, "b": True})


def test_decide_reads_the_start_of_a_long_text_when_told(toy_tokenizer):
    """Its validators read the part the model reads (they had been given the whole text)."""
    model = tiny_model(toy_tokenizer)
    text = "smoke in the cabin " * 2000
    with pytest.raises(ExtractionError, match="pass truncate=True"):
        decide(text, Triage, model=model)
    seen = []

    class Seen(Triage):
        @field_validator("*")
        @classmethod
        def _read(cls, v, info):
            seen.append(info.context["text"])
            return v

    assert isinstance(decide(text, Seen, model=model, truncate=True), Seen)
    assert seen and all(text.startswith(t) and len(t) < len(text) for t in seen)


def test_a_model_without_prefill_step_answers_the_same_in_two_passes(toy_tokenizer):
    model = tiny_model(toy_tokenizer, std=1.0)
    fused, one = decide("x", DispatchJudgments, model=model, trace=True)
    apart, two = decide("x", DispatchJudgments, model=without_prefill_step(model), trace=True)
    assert fused == apart and (one.forward_passes, two.forward_passes) == (1, 2)


class Diversion(BaseModel):
    """Divert only where the text says so; a validator reads the text as extract's do."""
    urgent: bool
    divert: bool

    @field_validator("divert")
    @classmethod
    def _stated(cls, v, info):
        if v and "divert" not in info.context["text"]:
            raise ValueError("the text asks for no diversion")
        return v


@pytest.mark.parametrize("seed", range(4))
def test_decide_gives_the_validators_the_text(toy_tokenizer, seed):
    model = tiny_model(toy_tokenizer, seed=seed, std=1.0)
    assert not decide("smoke in the cabin", Diversion, model=model).divert
    assert isinstance(decide("smoke in the cabin, divert now", Diversion, model=model), Diversion)


class Fragile(BaseModel):
    urgent: bool

    @field_validator("urgent")
    @classmethod
    def _broken(cls, v):
        raise KeyError("a bug in the validator")


def test_a_validator_raising_in_decide_is_an_extraction_error(toy_tokenizer):
    with pytest.raises(ExtractionError, match="Fragile's validation raised KeyError"):
        decide("x", Fragile, model=tiny_model(toy_tokenizer, std=1.0))
