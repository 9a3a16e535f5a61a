"""The model card is rendered from training.json and evaluation.json only."""

import json

import torch
from safetensors.torch import load_file, save_file

from clover_struct.engine.config import preset
from training import model_card as MC
from training import train as T

EVALUATION = {
    "synthetic": {"n": 500, "valid_rate": 1.0, "field_em": 0.981, "record_em": 0.912, "seconds_per_record": 0.31,
                  "per_field": {"fir": 0.992, "qcode": 0.954}},
    "heldout_family": {"n": 200, "valid_rate": 1.0, "field_em": 0.871, "record_em": 0.5, "seconds_per_record": 0.3},
    "dispatch": {"n": 200, "valid_rate": 1.0, "field_em": 0.89962, "record_em": 0.5, "seconds_per_record": 0.3},
    "real_dev": None,
    "judgments": {"n": 200, "accuracy": 0.962, "alone_accuracy": 0.95, "violations": 0, "alone_violations": 7,
                  "facts_accuracy": 0.93, "notices": 410, "failed_notices": 4, "accuracy_true_geometry": 0.99,
                  "model_only": {"accuracy": 0.701, "violations": 0, "alone_accuracy": 0.69, "alone_violations": 3}},
}


def fake_run(path, minutes=12.5, device=None, before=None, init="runs/first"):
    path.mkdir()
    config = preset("tiny", vocab_size=600, mask_token_id=1, pad_token_id=0, eos_token_id=2)
    (path / "config.json").write_text(json.dumps(config.to_dict()))
    save_file({"a": torch.zeros(3, 4), "b": torch.zeros(5)}, str(path / "model.safetensors"))
    (path / "tokenizer.json").write_text("{}")
    args = {"config": "tiny", "mix": {"notam": 0.5, "zone": 0.5}, "batch_tokens": 6000, "lr": 0.003,
            "block_size": None, "minutes": minutes, "steps": None, "warm_steps": 300, "warm_mix": {"copy": 0.5, "notam": 0.5}}
    state = {"step": 1234, "elapsed": minutes * 60, "args": args, **({"device": device} if device else {})}
    if before:   # a second stage (train.py --init): the first one's state rides along
        first = json.loads((before / "train_state.json").read_text())
        state["before"] = {**first, "last_log": {"loss": 0.5, "acc_value": 0.7}}
        args.update(init=init, seed=1, warm_steps=0, lr=0.0005)
    (path / "train_state.json").write_text(json.dumps(state))
    (path / "train_log.jsonl").write_text(json.dumps({"step": 1230, "loss": 0.0312, "acc_value": 0.987}) + "\n")


def test_card_numbers_come_from_the_run_and_the_evaluation(tmp_path):
    fake_run(tmp_path / "run")
    (tmp_path / "eval.json").write_text(json.dumps(EVALUATION))
    card = MC.write(tmp_path / "run", tmp_path / "eval.json", tmp_path / "ship", hardware="2 cores")
    text = card.read_text()
    for needle in ("17 parameters", "1,234 steps in 12.5 minutes", "--minutes 12.5", "machine: 2 cores",
                   "| synthetic | 500 | 1.000 | 0.981 | 0.912 | 0.31 |", "accuracy 0.962 decided jointly (0 rule",
                   "0.950 answering each open question on its own (7 cases", "judgments accuracy: 0.962 (target 0.95) met",
                   "synthetic field_em: 0.981 (target 0.97) met",
                   "heldout_family field_em: 0.871 (target 0.9) NOT met", "loss 0.0312",
                   "dispatch field_em: 0.8996 (target 0.9) NOT met",   # not "0.900 ... NOT met"
                   "--warm-steps 300 --warm-mix copy=0.5,notam=0.5", "the first 300 steps are causal", "on copy 0.5, notam 0.5;",
                   "Per field, synthetic: fir 0.99, qcode 0.95.", "zones of the 410 notices (4 failed)",
                   "while in force; right 0.930)", "from the true zones' geometry, 0.990.",
                   "geometry included: 0.701 jointly (0 rule violations), 0.690 each on its own (3 cases"):
        assert needle in text, needle
    assert "real_dev" not in text   # absent sets are left out, not scored as zero
    assert {p.name for p in (tmp_path / "ship").iterdir()} == {
        "config.json", "model.safetensors", "tokenizer.json", "training.json", "evaluation.json", "MODEL_CARD.md"}
    assert MC.render_dir(tmp_path / "ship") in text


def test_rendering_again_keeps_the_hand_written_notes(tmp_path):
    fake_run(tmp_path / "run")
    (tmp_path / "eval.json").write_text(json.dumps(EVALUATION))
    card = MC.write(tmp_path / "run", tmp_path / "eval.json", tmp_path / "ship", hardware="2 cores")
    card.write_text(card.read_text() + "\nThe polygons are weak.\n")
    better = {**EVALUATION, "synthetic": {**EVALUATION["synthetic"], "field_em": 0.99}}
    (tmp_path / "eval.json").write_text(json.dumps(better))
    text = MC.write(tmp_path / "run", tmp_path / "eval.json", tmp_path / "ship").read_text()
    assert "The polygons are weak." in text and "| 0.990 |" in text and text.count(MC.NOTES) == 1


def test_the_command_names_the_device_of_a_gpu_run(tmp_path):
    fake_run(tmp_path / "cpu")
    fake_run(tmp_path / "gpu", device="cuda")
    assert "--device" not in MC.training_summary(tmp_path / "cpu", None)["command"]
    assert "--minutes 12.5 --device cuda" in MC.training_summary(tmp_path / "gpu", None)["command"]


def test_a_second_stage_card_gives_both_commands(tmp_path):
    fake_run(tmp_path / "first", device="cuda")
    fake_run(tmp_path / "second", minutes=90, before=tmp_path / "first")
    (tmp_path / "eval.json").write_text(json.dumps(EVALUATION))
    text = MC.write(tmp_path / "second", tmp_path / "eval.json", tmp_path / "ship", hardware="2 cores").read_text()
    first, _, second = text.partition("- stage 2: ")
    assert "- stage 1: `python -m training.train --out runs/first --config tiny --minutes 12.5 --device cuda" in first
    assert "loss 0.5, accuracy on masked value tokens 0.7" in first and "the first 300 steps are causal" in first
    assert "`python -m training.train --out runs/mini --config tiny --minutes 90" in second
    assert "--seed 1" in second and "--warm-steps 0" in second and "--init runs/first" in second
    assert "from the weights and tokenizer of stage 1" in second and "lr 0.0005" in second
    assert "loss 0.0312" in second and "causal" not in second.partition("## Scores")[0]


def three_stage_card(tmp_path, init_2: str, init_3: str) -> tuple[str, str, str]:
    """The card's text of stage 1, stage 2 and stage 3 of a three-stage run with those --init values."""
    fake_run(tmp_path / "first", device="cuda")
    fake_run(tmp_path / "second", minutes=90, before=tmp_path / "first", init=init_2)
    fake_run(tmp_path / "third", minutes=75, before=tmp_path / "second", init=init_3)
    (tmp_path / "eval.json").write_text(json.dumps(EVALUATION))
    text = MC.write(tmp_path / "third", tmp_path / "eval.json", tmp_path / "ship", hardware="2 cores").read_text()
    first, _, rest = text.partition("- stage 2: ")
    second, _, third = rest.partition("- stage 3: ")
    return first, second, third


def test_a_third_stage_card_gives_all_three_commands(tmp_path):
    first, second, third = three_stage_card(tmp_path, "runs/first", "runs/second")
    assert "- stage 1: `python -m training.train --out runs/first --config tiny --minutes 12.5 --device cuda" in first
    assert "`python -m training.train --out runs/second --config tiny --minutes 90" in second
    assert "--init runs/first" in second and "from the weights and tokenizer of stage 1" in second
    assert "`python -m training.train --out runs/mini --config tiny --minutes 75" in third
    assert "--init runs/second" in third and "from the weights and tokenizer of stage 2" in third


def test_stages_trained_over_the_shipped_directory_get_their_own(tmp_path):
    """Stages 2 and 3 both read `--init runs/mini` (each trained over the shipped run): stage 1
    prints as runs/mini-1, stage 2 as runs/mini-2, and each later command reads the one before."""
    first, second, third = three_stage_card(tmp_path, "runs/mini", "runs/mini")
    assert "- stage 1: `python -m training.train --out runs/mini-1 --config tiny" in first
    assert "`python -m training.train --out runs/mini-2 --config tiny" in second and "--init runs/mini-1" in second
    assert "`python -m training.train --out runs/mini --config tiny" in third and "--init runs/mini-2" in third


def test_a_near_perfect_score_is_not_rounded_up_to_a_perfect_one(tmp_path):
    fake_run(tmp_path / "run")
    real = {"n": 553, "valid_rate": 1.0, "field_em": 0.99968, "qline_location_validity_em": 0.99968}
    (tmp_path / "eval.json").write_text(json.dumps({**EVALUATION, "real_dev": real}))
    text = MC.write(tmp_path / "run", tmp_path / "eval.json", tmp_path / "ship").read_text()
    assert "| real_dev | 553 | 1.000 | 0.9997 |" in text and "validity: 0.9997 field" in text


def test_the_shipped_model_unpacks_into_a_run_a_next_stage_starts_from(tmp_path):
    run = MC.unpack(MC.SHIPPED, tmp_path / "mini-6")
    recorded = json.loads((MC.SHIPPED / "training.json").read_text())
    recorded.pop("parameters")
    assert MC.training_summary(run, None) == recorded   # the record turned back and summarised again
    model, before = T.load_weights(run)                 # what --init reads
    assert before["step"] == recorded["steps"] and before["before"]["last_log"] == recorded["before"]["last_log"]
    shipped, weights = load_file(str(MC.SHIPPED / "model.safetensors")), model.state_dict()
    assert set(shipped) <= set(weights) and all(torch.equal(weights[n], t) for n, t in shipped.items())
