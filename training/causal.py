"""The causal objective: clover-mini's autoregressive twin, the peer of the benchmarks (issue 6).

Same data stream as the block-diffusion objective: the kind of each step, the example seeds
and the examples skipped (records over a slot budget, which the canvas cannot write) are those
of `train.Data`, and a batch is filled up to the same token budget; where a canvas has several
blocks (dispatch tasks), the diffusion step trains one, on the rows that reach it, and the twin
every row's whole record. Only the rows differ: a row
is `api.prompt_ids(tok, text, canvas)`, then the gold record as compact JSON (what
outlines-core's JSON regex admits with whitespace pattern "", keys in schema order), then eos.
The loss is next-token cross-entropy on the JSON and eos tokens only, the model run causally.
Runs save with model_type "qwen3_5_moe_text", so transformers loads them as
Qwen3_5MoeForCausalLM and `load_model` reads them too.
"""

from __future__ import annotations

import json

import torch
import torch.nn.functional as F

from .train import AUX_COEF, Data

MODEL_TYPE = "qwen3_5_moe_text"


def record_json(gold) -> str:
    """The record as the twin writes it: compact JSON, every field, keys in schema order."""
    return json.dumps(gold.model_dump(mode="json", by_alias=True), separators=(",", ":"), ensure_ascii=False)


class CausalData(Data):
    """Batches of (prompt ids, JSON + eos ids) rows, one kind each, as a pure function of (seed, step)."""

    def target(self, canvas, gold) -> list[int]:
        canvas.fill(gold)   # the diffusion model never sees a record its canvas cannot write
        return self.tok.encode(record_json(gold)) + [self.tok.eos_id]

    def block(self, kind: str, step: int) -> None:
        return None   # the whole record, every step


def collate(rows, pad_id: int):
    """Right-padded rows: ids [B, T] and the loss mask [B, T], True on the JSON and eos tokens."""
    T = max(len(p) + len(t) for p, t in rows)
    ids = torch.full((len(rows), T), pad_id)
    target = torch.zeros(len(rows), T, dtype=torch.bool)
    for b, (p, t) in enumerate(rows):
        ids[b, :len(p) + len(t)] = torch.tensor(p + t)
        target[b, len(p):len(p) + len(t)] = True
    return ids, target


def step_loss(model, balance, data: CausalData, step: int, seed: int):
    """Loss and stats of the batch of `step` (the same signature and stats as train.step_loss)."""
    kind, _, _, rows = data.batch(step)
    ids, target = (t.to(model.device) for t in collate(rows, model.config.pad_token_id))
    # position t predicts token t+1; right padding comes after every target, so causally it is never seen
    predicts = target[:, 1:]
    h = model.hidden(ids[:, :-1], mode="causal")[predicts]
    logits = model.lm_head(h)                                             # [M, V]: target positions only
    gold = ids[:, 1:][predicts]
    ce = F.cross_entropy(logits.float(), gold)
    aux = balance.pop()
    with torch.no_grad():
        hit = int((logits.argmax(-1) == gold).sum())
    n = int(predicts.sum())
    stats = dict(kind=kind, rows=len(rows), tokens=sum(len(p) + len(t) for p, t in rows), masked=n,
                 hit=hit, value=n, value_hit=hit)
    return ce + AUX_COEF * aux, ce.detach(), stats
