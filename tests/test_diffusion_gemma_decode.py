"""extract, extract_many, decide and `clover-struct info` on tiny random DiffusionGemma directories.

The checkpoints are transformers' DiffusionGemmaForBlockDiffusion with random weights, saved as
safetensors beside a toy tokenizer.json and loaded by our load_model (tiny_models.py). Random
weights say nothing about quality: these tests check the contract (valid instances, the same
record for the same seed, the pass budget, the prompt the chat template makes)."""

import json
from pathlib import Path
from typing import Literal, Optional

import pytest
from pydantic import BaseModel, Field

from clover_struct import CheckpointError, ExtractionError, cli, decide, extract, extract_many, implies, load_model
from clover_struct.api import prepare, prompt_ids
from tiny_models import tiny_diffusion_gemma

pytest.importorskip("transformers", reason="transformers is a test extra: pip install -e .[test]")

# A Gemma-style chat template (written for these tests): bos, then turns between turn markers;
# the assistant's role is "model", and the answer (the canvas) starts after the last marker. Its
# block tags stand on lines of their own, indented, as transformers' trim_blocks and lstrip_blocks expect.
GEMMA_STYLE = """{{ bos_token }}{% for message in messages %}
    {% if message['role'] not in ('user', 'assistant', 'system') %}
{{ raise_exception('roles are user, assistant and system') }}
    {% endif %}
<start_of_turn>{{ 'model' if message['role'] == 'assistant' else message['role'] }}
{{ message['content'] | trim }}<end_of_turn>
{% endfor %}
{% if add_generation_prompt %}
<start_of_turn>model
{% endif %}
"""


class Item(BaseModel):
    a: str = Field(max_length=5)
    n: Optional[int]


class Record(BaseModel):   # 60 canvas tokens: four canvases of 16
    code: str = Field(pattern=r"^[A-Z]{4}$")
    items: list[Item] = Field(max_length=3)
    flag: Literal["yes", "no"]


class Triage(BaseModel):
    urgent: bool
    lane: Literal["left", "right", "hold"]


TEXTS = ["EGTT closed 1200 to 1400", "nothing to see", "ABCD 12 yes, item q 7"]


@pytest.fixture(scope="module")
def model(toy_tokenizer, tmp_path_factory):
    return tiny_diffusion_gemma(toy_tokenizer, tmp_path_factory.mktemp("dg"), canvas=16, std=0.5, seed=4)


def budget(canvas, block_size):
    return sum(max((min(s.end, e) - max(s.start, b) for s in canvas.slots if s.start < e and b < s.end), default=0)
               for b, e in canvas.spans(block_size))


def test_records_are_valid_and_the_same_for_the_same_seed(model):
    _, canvas, _ = prepare(Record, model)
    assert len(canvas.spans(model.config.block_size)) >= 4   # the record spans several canvases
    runs = [extract_many(TEXTS, Record, model=model, trace=True, seed=seed, temperature=t)
            for seed, t in [(1, 0.0), (1, 0.0), (2, 0.0), (None, 0.0), (None, 0.0), (3, 0.7), (3, 0.7)]]
    for run in runs:
        for value, trace in run:
            assert isinstance(value, Record), value
            assert 1 <= trace.forward_passes <= budget(canvas, model.config.block_size)
    same = [[(v, t.forward_passes, t.tokens_per_step) for v, t in run] for run in runs]
    assert same[0] == same[1] and same[3] == same[4] and same[5] == same[6]
    assert same[0] != same[2], "another seed, other noise: some record or step should differ"


@pytest.mark.parametrize("seed, temperature", [(1, 0.0), (None, 0.0), (3, 0.7)])
def test_a_record_does_not_hang_on_its_batch(model, seed, temperature):
    """Each row draws its noise and samples from generators of its own (seed and prompt), and only
    on its own steps: a text gives one record alone, first or last in a batch, or in batches of
    one, so a resumed command-line run writes what one run writes (a shared generator had given
    63, 6 and 445). Its confidence agrees to rounding: a batch's padded passes differ from one
    row's by about 1e-6, which these random weights, fed back each step, can grow."""
    options = dict(model=model, trace=True, seed=seed, temperature=temperature)
    runs = [extract_many(TEXTS, Record, **options), extract_many(TEXTS[::-1], Record, **options)[::-1],
            extract_many(TEXTS, Record, batch_size=1, **options), [extract(t, Record, **options) for t in TEXTS]]
    records = [[(v, t.tokens_per_step) for v, t in run] for run in runs]
    assert records[0] == records[1] == records[2] == records[3]
    lowest = [[t.lowest[1] for _, t in run] for run in runs]
    gap = max(abs(a - b) for run in lowest[1:] for a, b in zip(run, lowest[0]))
    print(f"largest gap between the runs' lowest confidences: {gap:.2e}")
    assert gap < 1e-2


def test_extract_and_decide_work_unchanged(model):
    zone = extract(TEXTS[0], Record, model=model)
    assert isinstance(zone, Record)
    answer = decide("Smoke in the cabin.", Triage, model=model, rules=[implies("urgent", "lane=left")])
    assert isinstance(answer, Triage) and (not answer.urgent or answer.lane == "left")
    assert decide("Smoke in the cabin.", Triage, model=model) == decide("Smoke in the cabin.", Triage, model=model)
    with pytest.raises(ExtractionError, match="empty"):
        extract("  ", Record, model=model)


def test_a_gemma_style_chat_template_frames_the_prompt(make_toy_tokenizer, tmp_path):
    """The prompt is the template rendered exactly as transformers' apply_chat_template renders it
    (bos by name, block whitespace trimmed), ending where the model's turn (the canvas) begins."""
    from transformers import PreTrainedTokenizerFast

    tok = make_toy_tokenizer(["<|endoftext|>", "<|mask|>", "<|pad|>", "<bos>", "<start_of_turn>", "<end_of_turn>"])
    gemma = tiny_diffusion_gemma(tok, tmp_path, canvas=16, std=0.5, chat_template=GEMMA_STYLE)
    assert gemma.tokenizer.chat_template == GEMMA_STYLE and gemma.tokenizer.bos_id == tok.token_to_id("<bos>")
    _, canvas, _ = prepare(Record, gemma)

    rendered = []

    class Recording:   # the checkpoint's tokenizer, keeping the text it is asked to encode
        def __getattr__(self, name):
            return getattr(gemma.tokenizer, name)

        def encode(self, text):
            rendered.append(text)
            return gemma.tokenizer.encode(text)

    ids = prompt_ids(Recording(), "EGTT closed", canvas)
    theirs = PreTrainedTokenizerFast(tokenizer_file=str(tmp_path / "tokenizer.json"), bos_token="<bos>",
                                     chat_template=GEMMA_STYLE)
    instruction = rendered[0].split("<start_of_turn>user\n")[1].split("<end_of_turn>")[0]
    assert instruction.startswith("Extract a Record record from the text below") and instruction.endswith(
        "Text:\nEGTT closed") and json.dumps(canvas.schema, separators=(",", ":")) in instruction
    assert rendered[0] == theirs.apply_chat_template([{"role": "user", "content": instruction}], tokenize=False,
                                                     add_generation_prompt=True)
    assert rendered[0] == f"<bos><start_of_turn>user\n{instruction}<end_of_turn>\n<start_of_turn>model\n"
    assert ids[0] == tok.token_to_id("<bos>") and ids[-6:] == [tok.token_to_id("<start_of_turn>"), *tok.encode("model")]
    assert isinstance(extract("EGTT closed", Record, model=gemma), Record)


def test_the_chat_template_is_read_where_transformers_saves_it(make_toy_tokenizer, tmp_path):
    """transformers saves a template as chat_template.jinja (it had been passed over for no
    template); tokenizer_config.json may hold a list of named ones, whose "default" is used."""
    from transformers import PreTrainedTokenizerFast

    tok = make_toy_tokenizer(["<|endoftext|>", "<|mask|>", "<|pad|>", "<bos>", "<start_of_turn>", "<end_of_turn>"])
    tiny_diffusion_gemma(tok, tmp_path, canvas=16, std=0.5)
    theirs = PreTrainedTokenizerFast(tokenizer_file=str(tmp_path / "tokenizer.json"), bos_token="<bos>",
                                     chat_template=GEMMA_STYLE)
    theirs.save_pretrained(tmp_path)
    assert (tmp_path / "chat_template.jinja").is_file()
    assert load_model(tmp_path).tokenizer.chat_template == GEMMA_STYLE
    (tmp_path / "chat_template.jinja").unlink()
    config = tmp_path / "tokenizer_config.json"
    named = [{"name": "tool_use", "template": "{{ x }}"}, {"name": "default", "template": GEMMA_STYLE}]
    config.write_text(json.dumps({**json.loads(config.read_text()), "chat_template": named}))
    assert load_model(tmp_path).tokenizer.chat_template == GEMMA_STYLE
    config.write_text(json.dumps({"chat_template": named[:1]}))
    with pytest.raises(CheckpointError, match="tokenizer_config.json: chat_template is neither"):
        load_model(tmp_path)


@pytest.mark.parametrize("template,why", [("{% for m in messages %}", "does not compile: Unexpected end"),
                                          ("{{ raise_exception('no system turn') }}", "refused any text: no system"),
                                          ("{{ 1 // 0 }}", "fails on any text .ZeroDivisionError")])
def test_a_template_that_fails_on_any_text_is_a_checkpoint_error(model, monkeypatch, template, why):
    monkeypatch.setattr(model.tokenizer, "chat_template", template)
    with pytest.raises(CheckpointError, match=why):
        extract(TEXTS[0], Record, model=model)


def test_a_template_that_refuses_one_text_fails_that_record_alone(model, monkeypatch):
    """Its refusal had been a CheckpointError that lost the whole batch (and a failing division
    'a bug in clover-struct')."""
    refusing = ("{% if 'bomb' in messages[0]['content'] %}{{ raise_exception('content refused') }}{% endif %}"
                "{% for m in messages %}{{ m['content'] }}{% endfor %}")
    monkeypatch.setattr(model.tokenizer, "chat_template", refusing)
    got = extract_many([TEXTS[0], "a bomb threat", TEXTS[2]], Record, model=model)
    assert isinstance(got[0], Record) and isinstance(got[2], Record)
    assert isinstance(got[1], ExtractionError) and "refused this text: content refused" in str(got[1])


def test_a_template_renders_as_transformers_renders_it(model, monkeypatch):
    """tojson unescaped and unsorted, strftime_now and {% generation %}, as transformers gives them
    (they had been escaped, undefined and an unknown tag)."""
    from transformers import PreTrainedTokenizerFast

    from clover_struct.api import lay_out

    template = ("{{ bos_token }}{% for m in messages %}{{ {'z': 1, 'a': m['content'][-12:]} | tojson }}{% endfor %}"
                "{% generation %}<start_of_turn>model{% endgeneration %}{{ strftime_now('%Y')[:0] }}")
    monkeypatch.setattr(model.tokenizer, "chat_template", template)
    ours = model.tokenizer.decode(prompt_ids(model.tokenizer, "closed < 2 km & 'x'", lay_out(Record, model)))
    hf = PreTrainedTokenizerFast(tokenizer_file=str(Path(model.source) / "tokenizer.json"), bos_token="<bos>")
    theirs = hf.apply_chat_template([{"role": "user", "content": "closed < 2 km & 'x'"}], chat_template=template,
                                    tokenize=False, add_generation_prompt=True)
    print("ours:", ours[-60:], "| transformers:", theirs[-60:])
    assert ours.endswith("""{"z": 1, "a": "< 2 km & 'x'"}<start_of_turn>model""") and theirs.endswith(ours)


@pytest.mark.filterwarnings("ignore:.*the vision tower is ignored")
def test_info_names_the_family_canvas_parameters_and_dtype(model, capsys):
    assert cli.main(["info", "--model", str(model.source)]) == 0
    out = {k: v.strip() for k, v in (line.split(":", 1) for line in capsys.readouterr().out.splitlines())}
    assert out["family"] == "diffusion_gemma (uniform noise, self-conditioning)"
    assert out["block size"] == "16 (the canvas length)" and out["dtype"] == "float32 on cpu"
    assert out["parameters"] == f"{sum(p.numel() for p in model.parameters()):,}"
    assert out["layers"] == "2: 1 sliding_attention (window 16), 1 full_attention (global)  [SA]"
    assert out["experts"].startswith("4, top-2 per token") and out["mask id"] == "None"
