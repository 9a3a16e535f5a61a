"""Training of clover-mini, on a tiny config and a tiny tokenizer (seconds on a CPU).

The tokenizer is trained by the same function as the real one, on a small corpus, so
the layout checks here exercise its pre-tokenizer and special tokens.
"""

import json
import random
from datetime import datetime, timezone

import pytest
import torch
import torch.nn.functional as F
from safetensors.torch import load_file

import clover_struct
from clover_struct.api import prompt_ids
from clover_struct.schema_walk import build_canvas
from training import data as D
from training import objective as O
from training import train as T
from training.generate import sample
from training.tokenizer import SPECIAL_TOKENS

KINDS = {"notam": "Notam", "zone": "NoFlyZone", "dispatch": "DispatchMessage", "judgment": "DispatchJudgments"}


def args(out, tokenizer_path, *extra):
    return T.parser().parse_args(["--out", str(out), "--config", "tiny", "--tokenizer", str(tokenizer_path),
                                  "--mix", "notam=1,judgment=1", "--batch-tokens", "1500", "--warmup", "2",
                                  "--log-every", "1", "--threads", str(torch.get_num_threads()), *extra])


def test_tokenizer_has_specials_digits_and_bytes(tokenizer_path):
    from clover_struct.engine.tokenizer import Tokenizer

    tok = Tokenizer.from_file(tokenizer_path)
    assert (tok.pad_id, tok.mask_id, tok.eos_id) == (0, 1, 2)
    assert [tok._tok.id_to_token(i) for i in range(3)] == list(SPECIAL_TOKENS)
    for text in ("FL195 074058.69N", "禁止无人机飞行 半径 500 米", "Ωmega ✈ 😀"):
        ids = tok.encode(text)
        assert b"".join(tok.token_bytes(i) for i in ids) == text.encode()
    assert all(len(tok.token_bytes(i)) == 1 for i in tok.encode("0123456789"))
    code = tok.encode("ZGZU/QRDCA")   # capitals one by one, in the notice and in a slot alike
    assert [tok.token_bytes(i) for i in code] == [bytes([c]) for c in b"ZGZU/QRDCA"]
    assert tok.encode("ZGZU") == code[:4]


@pytest.mark.parametrize("block", [None, "48"], ids=["one-block", "48-token-blocks"])
def test_loss_falls_on_a_fixed_batch(tokenizer_path, tmp_path, block):
    torch.manual_seed(0)
    a = args(tmp_path, tokenizer_path, "--steps", "20", "--lr", "3e-3", *(["--block-size", block] if block else []))
    model, opt = T.build(a, tmp_path)
    data = D.Data(model.tokenizer, {"notam": 1.0}, 1500, seed=0, block_size=model.config.block_size)
    balance = O.Balance(model)
    losses = []
    for _ in range(20):   # always step 0: the same rows and the same mask
        loss, ce, _ = O.step_loss(model, balance, data, 0, 0)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(ce))
    assert all(torch.isfinite(torch.tensor(losses))), losses
    assert losses[-1] < 0.7 * losses[0], f"loss did not fall: {losses}"


def test_a_block_step_noises_one_block_after_clean_history(tokenizer_path, tmp_path, monkeypatch):
    a = args(tmp_path, tokenizer_path, "--steps", "1", "--block-size", "48")
    model, _ = T.build(a, tmp_path)
    data = D.Data(model.tokenizer, {"notam": 1.0}, 1500, seed=0, block_size=model.config.block_size)
    canvas = data.canvases["notam"]
    assert model.config.block_size == 48 < len(canvas)
    seen = {}

    def spy(ids, mode, block_len, pad):
        seen.update(ids=ids.clone(), block_len=block_len)
        return torch.zeros(*ids.shape, model.config.hidden_size, requires_grad=True)

    monkeypatch.setattr(model, "hidden", spy)
    for step in range(6):
        O.step_loss(model, O.Balance(model), data, step, 0)
        ids, n = seen["ids"], seen["block_len"]
        assert 0 < n <= 48
        block = ids[:, -n:]
        history = ids[:, :-n]
        assert (block == model.config.mask_token_id).any(1).all()     # every row has noise in the block
        assert not (history == model.config.mask_token_id).any()      # the history is clean


def test_item_block_steps_noise_one_task_after_the_tasks_before_it(tokenizer_path, tmp_path, monkeypatch):
    from pydantic import Field, create_model

    from clover_struct.schemas import DispatchMessage
    from clover_struct.schemas.dispatch import Task

    blocked = create_model("DispatchMessage", __base__=DispatchMessage, tasks=(
        list[Task], Field(min_length=1, max_length=8, json_schema_extra={"item_blocks": True})))
    monkeypatch.setitem(D.SCHEMAS, "dispatch", blocked)
    model, _ = T.build(args(tmp_path, tokenizer_path, "--steps", "1"), tmp_path)
    data = D.Data(model.tokenizer, {"dispatch": 1.0}, 6000, seed=0, block_size=model.config.block_size)
    canvas = data.canvases["dispatch"]
    items = [g for g in canvas.groups if g.kind == "item" and g.path.count("[") == 1]
    assert data.spans["dispatch"] == canvas.spans() and len(canvas.spans()) == len(items) == 8
    for seed in range(50):   # the tiny vocabulary writes some long names over budget
        _, _, gold = sample("dispatch", random.Random(seed))
        try:
            ids, n = canvas.fill(gold), len(gold.tasks)
            break
        except ValueError:
            continue
    assert [D.reached(canvas, ids, start) for start, _ in canvas.spans()] == [k <= n for k in range(8)]
    seen, starts = {}, set()

    def spy(ids, mode, block_len, pad):
        seen.update(ids=ids.clone(), block_len=block_len)
        return torch.zeros(*ids.shape, model.config.hidden_size, requires_grad=True)

    monkeypatch.setattr(model, "hidden", spy)
    for step in range(8):
        kind, canvas, (start, end), rows = data.batch(step)
        starts.add(start)
        k = canvas.spans().index((start, end))
        # every row decodes this task: the task before it is present (the message has at least k tasks)
        assert rows and all(len(canvas.validate(target).tasks) >= k for _, target in rows)
        O.step_loss(model, O.Balance(model), data, step, 0)
        ids, n = seen["ids"], seen["block_len"]
        assert n == end - start and ids.shape[1] == max(len(p) for p, _ in rows) + end   # later tasks dropped
        assert not (ids[:, :-n] == model.config.mask_token_id).any()                     # earlier ones clean
        assert (ids[:, -n:] == model.config.mask_token_id).any(1).all()
    assert len(starts) > 3


def test_zone_steps_train_the_vertex_blocks_as_often_as_decoding_reaches_them(tokenizer_path, tmp_path):
    """NoFlyZone's vertices are item blocks (32 of them): a step's block is one its first example
    reaches, so the first block (every field but the later vertices) is most steps' and no
    step is left without rows."""
    model, _ = T.build(args(tmp_path, tokenizer_path, "--steps", "1"), tmp_path)
    data = D.Data(model.tokenizer, {"zone": 1.0}, 8000, seed=0, block_size=model.config.block_size)
    canvas = data.canvases["zone"]
    assert len(data.spans["zone"]) == 32 and data.spans["zone"] == canvas.spans()
    firsts = 0
    for step in range(12):
        _, _, (start, end), rows = data.batch(step)
        assert rows and all(D.reached(canvas, target, start) for _, target in rows)
        firsts += start == 0
    assert 6 <= firsts < 12


def test_a_warm_step_predicts_every_slot_token_causally_from_the_clean_canvas(tokenizer_path, tmp_path):
    model, _ = T.build(args(tmp_path, tokenizer_path, "--steps", "1"), tmp_path)
    data = D.Data(model.tokenizer, {"notam": 1.0}, 1500, seed=0)
    _, ce, stats = O.step_loss(model, O.Balance(model), data, 0, 0, causal=True)
    _, canvas, _, rows = data.batch(0)
    ids, pad, gold = D.collate(rows, model.config.pad_token_id)
    slots = D.slot_index(canvas)[0] >= 0
    with torch.no_grad():
        logits = model(ids, "causal", pad=pad)[:, -len(canvas) - 1:-1]   # column t predicts t + 1
    reference = F.cross_entropy(logits[:, slots].reshape(-1, logits.shape[-1]), gold[:, slots].reshape(-1))
    print(f"warm-step loss {float(ce):.6f}, reference {float(reference):.6f}")
    assert stats["masked"] == len(rows) * int(slots.sum())
    assert float(ce) == pytest.approx(float(reference), abs=1e-5)


def test_the_decisions_loss_reads_values_the_pad_ending_each_and_whole_choices(tokenizer_path, tmp_path):
    from clover_struct.schemas import DispatchMessage

    model, _ = T.build(args(tmp_path, tokenizer_path, "--steps", "1"), tmp_path)
    tok, pad_id = model.tokenizer, model.config.pad_token_id
    canvas = build_canvas(DispatchMessage, tok)
    text, gold = sample("dispatch", random.Random(3))[1:]
    row = torch.tensor([canvas.fill(gold)])
    read = D.decisions(canvas, row, *D.slot_index(canvas))[0]
    expected = set()
    for s in canvas.slots:   # each slot: its value tokens, then one pad if the value is shorter than the budget
        span = row[0, s.start:s.end].tolist()
        k = s.budget if s.kind == "choice" or pad_id not in span else span.index(pad_id) + 1
        expected |= set(range(s.start, s.start + k))
    assert set(read.nonzero()[:, 0].tolist()) == expected
    slots = int(sum(s.budget for s in canvas.slots))
    print(f"dispatch canvas: {int(read.sum())} of {slots} slot positions are decisions")
    assert read.sum() < 0.3 * slots

    data = D.Data(tok, {"dispatch": 1.0}, 4000, seed=0, loss_on="decisions")
    _, ce, stats = O.step_loss(model, O.Balance(model), data, 0, 0)
    every = O.step_loss(model, O.Balance(model), D.Data(tok, {"dispatch": 1.0}, 4000, seed=0), 0, 0)[2]
    assert torch.isfinite(ce) and 0 < stats["masked"] < every["masked"]   # the same noise, fewer positions read
    assert stats["value"] == every["value"]                              # ... and every value token among them


def test_the_choice_weight_counts_choice_positions_that_many_times_in_the_mean(tokenizer_path, tmp_path, monkeypatch):
    from clover_struct.schemas import DispatchMessage

    model, _ = T.build(args(tmp_path, tokenizer_path, "--steps", "1"), tmp_path)
    canvas = build_canvas(DispatchMessage, model.tokenizer)
    slot, offset = D.slot_index(canvas)
    seen, hidden, cross_entropy = {}, model.hidden, F.cross_entropy
    monkeypatch.setattr(model, "hidden", lambda ids, *a, **k: seen.update(ids=ids.clone()) or hidden(ids, *a, **k))
    monkeypatch.setattr(F, "cross_entropy", lambda *a, **k: seen.setdefault("ce", cross_entropy(*a, **k)))
    data = D.Data(model.tokenizer, {"dispatch": 1.0}, 6000, seed=0, loss_on="decisions", choice_weight=4.0)
    _, ce, _ = O.step_loss(model, O.Balance(model), data, 0, 0)
    block = seen["ids"][:, -len(canvas):]
    gold = torch.tensor([g for _, g in data.batch(0)[3]])
    counted = (block == model.config.mask_token_id) & D.decisions(canvas, gold, slot, offset)
    choice = D.choice_positions(canvas, slot).expand_as(counted)[counted]
    weight = 1 + 3 * choice.float()
    assert 0 < int(choice.sum()) < int(counted.sum())
    assert torch.allclose(ce, (seen["ce"] * weight).sum() / weight.sum())
    assert not torch.allclose(ce, seen["ce"].mean())


def test_verdict_rows_are_conflicts_whose_geometric_answers_stay_clean_and_out_of_the_loss(
        tokenizer_path, tmp_path, monkeypatch):
    from clover_struct.airspace.geometry import route_facts
    from clover_struct.schemas import DispatchJudgments

    model, _ = T.build(args(tmp_path, tokenizer_path, "--steps", "1"), tmp_path)
    canvas = build_canvas(DispatchJudgments, model.tokenizer)
    given = [s for s in canvas.slots if s.path in D.GIVEN["verdicts"]]
    now = datetime.now(timezone.utc)
    facts = route_facts([(0, 0), (0, 1e-3)], 0.0, now, now, [])   # its names, without zones
    assert {s.path for s in given} == set(D.GIVEN["verdicts"]) == set(facts)
    seen, hidden = {}, model.hidden
    monkeypatch.setattr(model, "hidden", lambda ids, *a, **k: seen.update(ids=ids.clone()) or hidden(ids, *a, **k))
    data = D.Data(model.tokenizer, {"verdicts": 1.0}, 6000, seed=0, loss_on="decisions", full_mask=0.5)
    _, ce, stats = O.step_loss(model, O.Balance(model), data, 0, 0)
    rows = data.batch(0)[3]
    gold = torch.tensor([g for _, g in rows])
    block = seen["ids"][:, -len(canvas):]
    masked = block == model.config.mask_token_id
    for s in given:
        assert torch.equal(block[:, s.start:s.end], gold[:, s.start:s.end])
    asked = sum(s.budget for s in canvas.slots if s not in given)
    assert masked.sum(1).ge(1).all() and masked.sum(1).eq(asked).any()   # some rows: every decision masked
    assert torch.isfinite(ce) and stats["masked"] == int(masked.sum())
    assert all(canvas.parse(g.tolist())["conflict"] is True for g in gold)


def zone_drill(kind, tokenizer_path, tmp_path, monkeypatch):
    """The first batch of zone drill `kind` with its loss taken: (canvas, masked positions of
    the block it noised, the positions of the fields it scores alone (data.ONLY), the
    decisions, loss, stats). The block is the canvas's first, which every row decodes."""
    from clover_struct.schemas import NoFlyZone

    model, _ = T.build(args(tmp_path, tokenizer_path, "--steps", "1"), tmp_path)
    canvas = build_canvas(NoFlyZone, model.tokenizer)
    seen, hidden = {}, model.hidden
    monkeypatch.setattr(model, "hidden", lambda ids, *a, **k: seen.update(ids=ids.clone()) or hidden(ids, *a, **k))
    data = D.Data(model.tokenizer, {kind: 1.0}, 6000, seed=0, loss_on="decisions")
    _, _, (start, end), rows = data.batch(0)
    assert start == 0 == canvas.spans().index((start, end))
    _, ce, stats = O.step_loss(model, O.Balance(model), data, 0, 0)
    masked = seen["ids"][:, -end:] == model.config.mask_token_id
    slot, offset = D.slot_index(canvas)
    focus = torch.isin(slot, data.only[kind])[:end]
    asked = D.decisions(canvas, D.collate(rows, model.config.pad_token_id)[2], slot, offset)[:, :end]
    return canvas, masked, focus, asked, ce, stats


def test_flag_rows_are_scored_on_uas_only_alone_which_is_always_masked(tokenizer_path, tmp_path, monkeypatch):
    canvas, masked, focus, _, ce, stats = zone_drill("flags", tokenizer_path, tmp_path, monkeypatch)
    flag = next(s for s in canvas.slots if s.path == "uas_only")
    assert focus.nonzero().flatten().tolist() == list(range(flag.start, flag.end))
    assert masked[:, focus].all()                                          # the flag: always asked
    assert masked.sum(1).gt(flag.budget).any()                             # other slots masked too ...
    assert stats["masked"] == len(masked) * flag.budget and torch.isfinite(ce)   # ... but only the flag scored


def test_piece_rows_are_scored_on_the_reason_and_times_alone_as_the_noise_masks_them(tokenizer_path, tmp_path,
                                                                                     monkeypatch):
    canvas, masked, focus, asked, ce, stats = zone_drill("pieces", tokenizer_path, tmp_path, monkeypatch)
    pieces = [s for s in canvas.slots if s.path in ("reason", "valid_from_raw", "valid_to_raw")]
    assert len(pieces) == 3 and (masked & focus).any(1).all()             # every row is asked a piece ...
    assert any(0 < m[s.start:s.end].sum() < s.budget for m in masked for s in pieces)   # ... as the noise drew it
    assert masked[:, ~focus].any()                                         # other slots masked too ...
    assert stats["masked"] == int((masked & focus & asked).sum()) and torch.isfinite(ce)   # ... but only pieces scored


def test_reason_rows_are_scored_on_the_reason_alone_masked_whole(tokenizer_path, tmp_path, monkeypatch):
    """As the decoder reads a free-text copy: every position of the reason at once."""
    canvas, masked, focus, asked, ce, stats = zone_drill("reasons", tokenizer_path, tmp_path, monkeypatch)
    reason = next(s for s in canvas.slots if s.path == "reason")
    assert focus.nonzero().flatten().tolist() == list(range(reason.start, reason.end))
    assert masked[:, focus].all() and masked[:, ~focus].any()              # the reason whole, others as drawn
    assert stats["masked"] == int((masked & focus & asked).sum()) and torch.isfinite(ce)   # only the reason scored
    texts = [D.draw_example("reasons", random.Random(k))[0] for k in range(40)]
    assert 10 <= sum("禁飞区" in t for t in texts) <= 30                      # half of them Chinese drone notices


def test_noise_masks_only_slots_and_suffix_rows_mask_suffixes(tokenizer_path):
    from clover_struct.engine.tokenizer import Tokenizer
    from clover_struct.schemas import NoFlyZone

    canvas = build_canvas(NoFlyZone, Tokenizer.from_file(tokenizer_path))
    slot, offset = D.slot_index(canvas)
    masked = D.noise(slot, offset, 64, torch.Generator().manual_seed(0))
    assert not masked[:, slot < 0].any() and masked.any(1).all()
    suffix_like = 0
    for row in masked:
        suffix_like += all(not row[s.start:s.end].any() or row[s.start:s.end].long().diff().ge(0).all()
                           for s in canvas.slots)
    assert 10 < suffix_like < 64   # about half the rows mask slot suffixes; random rows rarely do


def test_full_mask_rows_hide_every_slot_and_leave_the_other_rows_as_they_were(tokenizer_path):
    from clover_struct.engine.tokenizer import Tokenizer
    from clover_struct.schemas import NoFlyZone

    canvas = build_canvas(NoFlyZone, Tokenizer.from_file(tokenizer_path))
    slot, offset = D.slot_index(canvas)
    plain = D.noise(slot, offset, 64, torch.Generator().manual_seed(0))
    some = D.noise(slot, offset, 64, torch.Generator().manual_seed(0), full=0.3)
    whole = some[:, slot >= 0].all(1)
    assert not some[:, slot < 0].any()
    assert 8 < int(whole.sum()) < 32 and int(plain[:, slot >= 0].all(1).sum()) < 3
    assert torch.equal(some[~whole], plain[~whole])   # the same draws, a share of rows then masked whole
    assert D.noise(slot, offset, 8, torch.Generator().manual_seed(1), full=1.0)[:, slot >= 0].all()


def test_resume_continues_exactly(tokenizer_path, tmp_path):
    T.train(args(tmp_path / "straight", tokenizer_path, "--steps", "4"))
    T.train(args(tmp_path / "split", tokenizer_path, "--steps", "4", "--stop-after", "2"))
    assert '"step": 2' in (tmp_path / "split" / "train_state.json").read_text()
    T.train(args(tmp_path / "split", tokenizer_path, "--resume"))
    a = load_file(str(tmp_path / "straight" / "model.safetensors"))
    b = load_file(str(tmp_path / "split" / "model.safetensors"))
    assert a.keys() == b.keys()
    worst = max((a[k] - b[k]).abs().max().item() for k in a)
    assert worst <= 1e-6, f"resumed weights differ from an uninterrupted run by {worst:.3g}"
    log = (tmp_path / "split" / "train_log.jsonl").read_text().splitlines()
    assert len(log) == 4


def test_a_second_stage_starts_from_the_first_runs_weights_and_remembers_it(tokenizer_path, tmp_path):
    T.train(args(tmp_path / "first", tokenizer_path, "--steps", "2"))
    second = args(tmp_path / "second", tokenizer_path, "--init", str(tmp_path / "first"), "--seed", "1", "--steps", "0")
    T.train(second)
    a = load_file(str(tmp_path / "first" / "model.safetensors"))
    b = load_file(str(tmp_path / "second" / "model.safetensors"))
    assert all(torch.equal(a[k], b[k]) for k in a)
    T.train(args(tmp_path / "second", tokenizer_path, "--resume", "--steps", "2"))
    state = json.loads((tmp_path / "second" / "train_state.json").read_text())
    assert state["step"] == 2 and state["args"]["init"] == str(tmp_path / "first") and state["args"]["seed"] == 1
    assert state["before"]["step"] == 2 and state["before"]["last_log"]["step"] == 2   # the first stage, for the card
    b = load_file(str(tmp_path / "second" / "model.safetensors"))
    assert any(not torch.equal(a[k], b[k]) for k in a)


def test_a_stage_starts_from_a_shipped_model_directory(tokenizer_path, tmp_path):
    """A shipped model keeps no run state, only its training record (training.json)."""
    import shutil

    T.train(args(tmp_path / "run", tokenizer_path, "--steps", "1"))
    shipped = tmp_path / "shipped"
    shipped.mkdir()
    for f in ("config.json", "model.safetensors", "tokenizer.json"):
        shutil.copy(tmp_path / "run" / f, shipped / f)
    record = json.loads((tmp_path / "run" / "train_state.json").read_text())
    (shipped / "training.json").write_text(json.dumps({**record, "last_log": {"step": 1}}))
    T.train(args(tmp_path / "next", tokenizer_path, "--init", str(shipped), "--steps", "1"))
    state = json.loads((tmp_path / "next" / "train_state.json").read_text())
    assert state["step"] == 1 and state["before"]["last_log"] == {"step": 1}


def test_saved_directory_loads_and_lays_out_every_schema(tokenizer_path, tmp_path):
    T.train(args(tmp_path, tokenizer_path, "--steps", "1"))
    model = clover_struct.load_model(tmp_path)
    cfg, tok = model.config, model.tokenizer
    assert (cfg.mask_token_id, cfg.pad_token_id) == (tok.mask_id, tok.pad_id)
    for kind, name in KINDS.items():
        schema = D.SCHEMAS[kind]
        assert schema.__name__ == name
        canvas = build_canvas(schema, tok, mask_id=cfg.mask_token_id, pad_id=cfg.pad_token_id)
        assert len(canvas) <= cfg.block_size
        for seed in range(50):   # the tiny vocabulary writes some long names over budget
            _, text, gold = sample(kind, random.Random(seed))
            try:
                filled = canvas.fill(gold)
                break
            except ValueError:
                continue
        assert canvas.validate(filled) == gold
        if kind in ("notam", "judgment"):   # a forward over the longer canvases is slow-ish
            ids = torch.tensor([prompt_ids(tok, text, canvas) + list(canvas.ids)])
            with torch.no_grad():
                logits = model(ids, mode="block", block_len=len(canvas))
            assert torch.isfinite(logits).all()


@pytest.mark.parametrize("drill", D.DRILLS)
def test_copy_drills_batch_like_any_kind(tokenizer_path, tmp_path, drill):
    model, _ = T.build(args(tmp_path, tokenizer_path, "--steps", "1"), tmp_path)
    data = D.Data(model.tokenizer, {drill: 1.0}, 1500, seed=0)
    kind, canvas, _, rows = data.batch(0)
    assert kind == drill and rows and all(len(gold) == len(canvas) for _, gold in rows)
    assert all(canvas.validate(gold) is not None for _, gold in rows)
    loss, ce, stats = O.step_loss(model, O.Balance(model), data, 0, 0)
    assert torch.isfinite(loss) and stats["value"] > 0


def test_copy_probe_runs_and_reports_when_copying_was_learned(capsys):
    from training import probe_copy

    for objective in ("causal", "diffusion"):
        out = probe_copy.probe("tiny", lr=1e-3, weight_decay=0.0, steps=3, every=1, objective=objective)
        assert out["steps"] == 3 and out["learned_at"] is None and 0 <= out["final_accuracy"] <= 1
        assert len(capsys.readouterr().out.splitlines()) == 3
