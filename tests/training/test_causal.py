"""The causal objective (the autoregressive twin), on the tiny config and a tiny tokenizer."""

import json

import pytest
import torch

import clover_struct
from clover_struct.schemas import Notam
from training import data as D
from training import objective as O
from training import train as T

transformers = pytest.importorskip("transformers", reason="transformers is a test extra: pip install -e .[test]")


def args(out, tokenizer_path, *extra):
    return T.parser().parse_args(["--out", str(out), "--config", "tiny", "--tokenizer", str(tokenizer_path),
                                  "--mix", "notam=1,judgment=1", "--batch-tokens", "1500", "--warmup", "2",
                                  "--log-every", "1", "--threads", str(torch.get_num_threads()),
                                  "--objective", "causal", *extra])


def test_the_loss_mask_covers_exactly_the_json_and_eos(tokenizer_path, tmp_path):
    model, _ = T.build(args(tmp_path, tokenizer_path), tmp_path)
    tok = model.tokenizer
    data = D.CausalData(tok, {"notam": 1.0}, 1500, seed=0)
    kind, canvas, _, rows = data.batch(0)
    ids, target = D.collate_causal(rows, tok.pad_id)
    assert len(rows) > 1 and len(rows) * ids.shape[1] <= 1500      # the token budget holds
    for b, (prompt, json_eos) in enumerate(rows):
        assert ids[b][target[b]].tolist() == json_eos
        assert ids[b, :len(prompt)].tolist() == prompt and not target[b, :len(prompt)].any()
        assert (ids[b, len(prompt) + len(json_eos):] == tok.pad_id).all()
        assert json_eos[-1] == tok.eos_id and tok.eos_id not in json_eos[:-1]
        text = tok.decode(json_eos[:-1])
        assert D.record_json(Notam.model_validate_json(text)) == text           # compact, every key
        assert ":" in text and ": " not in text.replace('": "', "")             # no whitespace between tokens
        assert tok.decode(prompt).endswith("record:\n")
    # the same stream as the diffusion objective: same kind, same examples in the same order
    d_kind, _, _, d_rows = D.Data(tok, {"notam": 1.0, "zone": 1.0}, 1500, seed=0).batch(3)
    c_kind, _, _, c_rows = D.CausalData(tok, {"notam": 1.0, "zone": 1.0}, 1500, seed=0).batch(3)
    k = min(len(d_rows), len(c_rows))
    assert c_kind == d_kind and [p for p, _ in c_rows[:k]] == [p for p, _ in d_rows[:k]]


def test_loss_falls_on_a_fixed_batch(tokenizer_path, tmp_path):
    model, opt = T.build(args(tmp_path, tokenizer_path, "--lr", "3e-3"), tmp_path)
    data = D.CausalData(model.tokenizer, {"notam": 1.0}, 1500, seed=0)
    balance = O.Balance(model)
    losses = []
    for _ in range(15):
        loss, ce, stats = O.causal_loss(model, balance, data, 0, 0)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(ce))
    assert stats["masked"] == sum(len(t) for _, t in data.batch(0)[3])
    assert all(torch.isfinite(torch.tensor(losses))), losses
    assert losses[-1] < 0.8 * losses[0], f"loss did not fall: {losses}"


def test_length_groups_give_the_loss_of_one_padded_call(tokenizer_path, tmp_path, monkeypatch):
    model, _ = T.build(args(tmp_path, tokenizer_path), tmp_path)
    data = D.CausalData(model.tokenizer, {"notam": 1.0}, 4000, seed=0)
    rows = data.batch(1)[3]
    monkeypatch.setattr(O, "length_groups", lambda rows: D.length_groups(rows, call_tokens=0))   # a call each
    assert len(O.length_groups(rows)) == len(rows) > 2
    ids, target = D.collate_causal(rows, model.tokenizer.pad_id)
    with torch.no_grad():
        logits = model(ids[:, :-1], "causal")[target[:, 1:]]
        padded = torch.nn.functional.cross_entropy(logits, ids[:, 1:][target[:, 1:]])
        _, grouped, stats = O.causal_loss(model, O.Balance(model), data, 1, 0)
    print(f"causal loss: one padded call {padded:.6f}, length groups {grouped:.6f}")
    assert stats["masked"] == int(target.sum()) and abs(grouped - padded) < 1e-5

    rows = [([0] * n, [1]) for n in (5, 300, 7, 290, 6)]
    groups = D.length_groups(rows, call_tokens=50)
    assert [[len(p) for p, _ in g] for g in groups] == [[5, 6, 7], [290, 300]]
    assert D.length_groups(rows, call_tokens=10_000) == [sorted(rows, key=lambda r: len(r[0]))]   # calls dear: one group
    assert D.length_groups([]) == []


def test_the_run_saves_a_twin_transformers_loads_and_resumes_causal(tokenizer_path, tmp_path):
    T.train(args(tmp_path, tokenizer_path, "--steps", "4", "--stop-after", "2"))
    state = json.loads((tmp_path / "train_state.json").read_text())
    assert state["args"]["objective"] == "causal" and state["step"] == 2
    # resumed without --objective: the run's own objective is kept
    T.train(T.parser().parse_args(["--out", str(tmp_path), "--resume", "--threads", "1", "--log-every", "1"]))
    state = json.loads((tmp_path / "train_state.json").read_text())
    assert state["args"]["objective"] == "causal" and state["step"] == 4
    log = [json.loads(line) for line in (tmp_path / "train_log.jsonl").read_text().splitlines()]
    assert len(log) == 4 and all(torch.isfinite(torch.tensor(r["loss"])) for r in log)
    assert json.loads((tmp_path / "config.json").read_text())["model_type"] == "qwen3_5_moe_text"

    ours = clover_struct.load_model(tmp_path)
    theirs = transformers.Qwen3_5MoeForCausalLM.from_pretrained(tmp_path).eval()
    _, _, _, rows = D.CausalData(ours.tokenizer, {"notam": 1.0}, 1500, seed=0).batch(0)
    ids = torch.tensor([rows[0][0] + rows[0][1]])
    with torch.no_grad():
        diff = (theirs(ids).logits - ours(ids, "causal")).abs().max().item()
    assert diff <= 1e-4, f"transformers and our engine differ by {diff:.3g} on the saved twin"
