"""Two ways to run the autoregressive twin (training/causal.py) on a schema, for compare.py.

- `EngineTwin`: our engine, greedy: `prefill` the prompt, then one token per forward through
  `commit` (the prefix cache), each masked by outlines-core's token index of the schema's
  compact-JSON regex (whitespace pattern "", as the twin was trained). Only final states
  allow eos, so a finished record is a complete JSON value. The 0x01 workaround of
  constraints.py is not needed: the object's only final state is after its closing brace,
  where nothing can follow.
- `OutlinesTwin`: the same weights loaded by transformers (Qwen3_5MoeForCausalLM) and run as
  Outlines users run a model: `outlines.from_transformers`, the pydantic schema as output
  type (Outlines' default whitespace, `[ ]?` between tokens), greedy `generate`. Forward
  passes are counted with a hook on the model. With whitespace="" it follows the regex
  EngineTwin follows, so the two must write the same tokens (tests check it).

Both are called with a notice's text, prompt the twin as the diffusion model is prompted
(`api.prompt_ids`), stop at eos or after `max_tokens`, and return (record or
ExtractionError, forward passes, tokens committed).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import torch
from pydantic import ValidationError

from clover_struct import ExtractionError
from clover_struct.api import prompt_ids


def parse(schema, text: str):
    """The record a generated JSON text spells, or the ExtractionError that says why not."""
    try:
        return schema.model_validate_json(text)
    except ValidationError as e:
        return ExtractionError("", f"generated JSON is not a valid record: {e.errors()[0]['msg']}")


def json_regex(schema) -> str:
    from outlines_core.json_schema import build_regex_from_schema

    return build_regex_from_schema(json.dumps(schema.model_json_schema()), whitespace_pattern="")


class EngineTwin:
    def __init__(self, model, schema, canvas, max_tokens: int):
        from outlines_core import Index

        self.model, self.schema, self.canvas, self.max_tokens = model, schema, canvas, max_tokens
        self.eos = model.config.eos_token_id
        self.index = Index(json_regex(schema), model.tokenizer.outlines_vocabulary(self.eos))
        self.masks: dict[int, torch.Tensor] = {}   # index state -> allowed tokens [vocab] bool
        self.text = ""                              # the last JSON written

    def allowed(self, state: int) -> torch.Tensor:
        if state not in self.masks:
            mask = torch.zeros(self.model.config.vocab_size, dtype=torch.bool)
            mask[self.index.get_allowed_tokens(state)] = True
            self.masks[state] = mask.to(self.model.device)
        return self.masks[state]

    @torch.no_grad()
    def __call__(self, text: str):
        model, device = self.model, self.model.device
        prompt = prompt_ids(model.tokenizer, text, self.canvas)
        cache, logits = model.prefill(torch.tensor([prompt], device=device))
        state, out, forwards = self.index.get_initial_state(), [], 1
        while True:
            token = int(logits[0].masked_fill(~self.allowed(state), -math.inf).argmax())
            if token == self.eos:
                break
            out.append(token)
            if len(out) == self.max_tokens:
                break
            state = self.index.get_next_state(state, token)
            logits = model.commit(torch.tensor([[token]], device=device), cache)
            forwards += 1
        self.text = model.tokenizer.decode(out)
        if token != self.eos:
            return ExtractionError("", f"no complete record in {self.max_tokens} tokens"), forwards, len(out)
        return parse(self.schema, self.text), forwards, len(out) + 1


class OutlinesTwin:
    def __init__(self, path: str | Path, tokenizer, schema, canvas, max_tokens: int, device, dtype,
                 whitespace: str | None = None):
        import outlines
        import transformers

        self.tokenizer, self.schema, self.canvas, self.max_tokens = tokenizer, schema, canvas, max_tokens
        self.prompts: dict[str, str] = {}
        self.text = ""                              # the last JSON written
        self.hf = transformers.Qwen3_5MoeForCausalLM.from_pretrained(path, dtype=dtype).to(device).eval()
        name = tokenizer._tok.id_to_token
        hf_tok = transformers.PreTrainedTokenizerFast(
            tokenizer_file=str(Path(path) / "tokenizer.json"), eos_token=name(tokenizer.eos_id),
            pad_token=name(tokenizer.pad_id))
        self.hf_tokenizer = hf_tok
        output_type = schema if whitespace is None else outlines.types.JsonSchema(schema, whitespace)
        self.generator = outlines.Generator(outlines.from_transformers(self.hf, hf_tok), output_type)
        self.forwards = 0
        self.hf.register_forward_hook(self._count)

    def _count(self, *_):
        self.forwards += 1

    def prepare(self, texts) -> None:
        """The prompts as text (Outlines takes text), checked to encode to our prompt ids; done
        before timing, as a user would hold the prompt string already."""
        for text in texts:
            ids = prompt_ids(self.tokenizer, text, self.canvas)
            self.prompts[text] = self.tokenizer.decode(ids)
            if self.hf_tokenizer(self.prompts[text])["input_ids"] != ids:
                raise ValueError("transformers' tokenizer does not encode the prompt to the ids our engine gets")

    def __call__(self, text: str):
        self.forwards = 0
        self.text = self.generator(self.prompts[text], max_new_tokens=self.max_tokens, do_sample=False)
        # one token per forward (the last one's is eos unless the limit was reached)
        value = parse(self.schema, self.text)
        if self.forwards == self.max_tokens and isinstance(value, ExtractionError):   # cut short: EngineTwin's words
            value = ExtractionError("", f"no complete record in {self.max_tokens} tokens")
        return value, self.forwards, self.forwards
