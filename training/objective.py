"""The training objectives: the block-diffusion loss clover-mini trains on, and the causal
loss of its autoregressive twin (the peer of the benchmarks).

Diffusion (`step_loss`): cross-entropy on the masked slot positions of a batch from
`data.Data`, plus a small MoE load-balancing term (`Balance`); with causal=True (the warm
phase) the clean canvas is read causally instead, with next-token loss on every slot token.
Causal (`causal_loss`): next-token cross-entropy on the JSON and eos tokens of a batch from
`data.CausalData`, the model run causally; such runs save as "qwen3_5_moe_text", which
transformers loads as Qwen3_5MoeForCausalLM and `load_model` reads too.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from clover_struct.engine.model import CloverModel, Router

from .data import TRAIN_SEED_BASE, WHOLE, CausalData, Data, choice_positions, collate, collate_causal, decisions, \
    length_groups, noise, slot_index

AUX_COEF = 0.01               # Switch-style load balancing, per MoE layer
# objective -> (data stream, loss, model_type the run saves as)
OBJECTIVES = {"diffusion": ("Data", "step_loss", "clover"), "causal": ("CausalData", "causal_loss", "qwen3_5_moe_text")}


class Balance:
    """Collects the Switch-transformer load-balancing loss, E * sum_e f_e P_e, of every router."""

    def __init__(self, model: CloverModel):
        self.terms: list[torch.Tensor] = []
        for m in model.modules():
            if isinstance(m, Router):
                m.register_forward_hook(self._hook)

    def _hook(self, module, inputs, output):
        if not torch.is_grad_enabled():
            return
        expert, _ = output
        probs = F.linear(inputs[0], module.weight).float().softmax(-1)          # [N, E]
        E = probs.shape[-1]
        frac = probs.new_zeros(E).index_add_(0, expert.reshape(-1), probs.new_ones(expert.numel())) / expert.numel()
        self.terms.append(E * (frac * probs.mean(0)).sum())

    def pop(self) -> torch.Tensor:
        out = torch.stack(self.terms).mean() if self.terms else torch.zeros(())
        self.terms.clear()
        return out


def step_loss(model, balance, data: Data, step: int, seed: int, causal: bool = False):
    """Loss and stats of the batch of `step`; causal: the warm phase's teacher-forced canvas."""
    kind, canvas, block, rows = data.batch(step)
    cfg = model.config
    ids, pad, gold = collate(rows, cfg.pad_token_id)
    slot, offset = slot_index(canvas)
    # A canvas of several blocks: one block with slots is noised, the blocks before it
    # stay clean as causal history and those after are dropped, as the decoder sees them.
    L = len(canvas)
    first, end = block or (0, L)
    slot[:first] = slot[end:] = -1
    slot[torch.isin(slot, data.given[kind])] = -1   # known values: clean, like fixed text
    if causal:   # every slot token is predicted
        masked = (slot[first:end] >= 0).expand(len(rows), -1)
    else:        # drawn on the CPU: the same on any device
        generator = torch.Generator().manual_seed(TRAIN_SEED_BASE + seed * 1_000_000_000 + step)
        masked = noise(slot, offset, len(rows), generator, data.full_mask)[:, first:end]
    # the positions the loss reads (slot is -1 outside the block)
    asked = (decisions(canvas, gold, slot, offset)[:, first:end] if data.loss_on == "decisions"
             else torch.ones_like(masked))
    counted = masked & asked
    counted = counted if counted.any() else masked
    if len(data.only[kind]):
        focus = torch.isin(slot, data.only[kind])[first:end].expand_as(masked)
        masked = masked | (focus if kind in WHOLE else focus & ~(masked & focus).any(1, keepdim=True))
        counted = masked & focus & asked
    ids = ids[:, :ids.shape[1] - (L - end)]
    gold = gold[:, first:end]
    n = end - first
    ids, pad, gold, masked, counted = (t.to(model.device) for t in (ids, pad, gold, masked, counted))
    if causal:   # from the clean tokens before it: column t predicts t + 1
        h = model.hidden(ids[:, :-1], mode="causal", pad=pad)[:, -n:][counted]
    else:
        ids[:, -n:] = torch.where(masked, cfg.mask_token_id, gold)
        h = model.hidden(ids, mode="block", block_len=n, pad=pad)[:, -n:][counted]
    logits = model.lm_head(h)                                             # [M, V]: counted positions only
    target = gold[counted]
    # Plain mean over masked tokens, not the ELBO's 1/r weight: the decoder never scores
    # likelihoods, it needs good per-position predictions at every noise level, and 1/r
    # (up to 20x at r = 0.05) would mostly add gradient variance from nearly clean rows.
    # Choice slots (enums, booleans, union tags) may weigh more: --choice-weight.
    choice = choice_positions(canvas, slot)[first:end].to(model.device)
    weight = 1 + (data.choice_weight - 1) * choice.expand_as(counted)[counted].float()
    ce = (F.cross_entropy(logits.float(), target, reduction="none") * weight).sum() / weight.sum()
    aux = balance.pop()
    with torch.no_grad():
        hit = logits.argmax(-1) == target
        value = target != cfg.pad_token_id
    stats = dict(kind=kind, rows=len(rows), tokens=ids.numel() - int(pad.sum()), masked=int(counted.sum()),
                 hit=int(hit.sum()), value=int(value.sum()), value_hit=int((hit & value).sum()))
    return ce + AUX_COEF * aux, ce.detach(), stats


def causal_loss(model, balance, data: CausalData, step: int, seed: int):
    """Loss and stats of the batch of `step` (the same signature and stats as step_loss). The
    rows run in length groups (data.length_groups): the mean over the batch's target tokens is
    the one a single padded call gives; the balancing term is each group's, weighed by its size."""
    kind, _, _, rows = data.batch(step)
    groups = length_groups(rows)
    sizes = [len(g) * max(len(p) + len(t) for p, t in g) for g in groups]   # positions each call runs
    total = sum(sizes)
    ce = aux = 0.0
    hit = n = 0
    for group, size in zip(groups, sizes):
        ids, target = (t.to(model.device) for t in collate_causal(group, model.config.pad_token_id))
        # position t predicts token t+1; right padding comes after every target, so causally it is never seen
        predicts = target[:, 1:]
        logits = model.lm_head(model.hidden(ids[:, :-1], mode="causal")[predicts])   # target positions only
        gold = ids[:, 1:][predicts]
        ce = ce + F.cross_entropy(logits.float(), gold, reduction="sum")
        aux = aux + balance.pop() * size / total
        with torch.no_grad():
            hit += int((logits.argmax(-1) == gold).sum())
        n += len(gold)
    ce = ce / n
    stats = dict(kind=kind, rows=len(rows), tokens=sum(len(p) + len(t) for p, t in rows), masked=n,
                 hit=hit, value=n, value_hit=hit)
    return ce + AUX_COEF * aux, ce.detach(), stats
