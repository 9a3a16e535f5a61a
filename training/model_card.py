"""Writes the shipped model's card from its training run and its evaluation.

    python -m training.model_card --run runs/mini --evaluation eval.json \
        --out clover_struct/models/clover-mini

copies the model (config.json, model.safetensors, tokenizer.json) from the run,
writes training.json (the run's settings, steps, time, machine and last logged
loss) and evaluation.json (evaluate.py's final line) beside it, and renders
MODEL_CARD.md from those files and config.json only, so every number in the card
comes from them (tests/test_embedded_model.py re-renders the shipped card and compares).
The card says what the model is for, its measured limitations, its data, one row per
training stage and its scores; the notes written as each stage ran are in training/LOG.md.
Text after the NOTES marker in an existing card is kept: the human part.

    python -m training.model_card --render

renders the shipped card again from its files (after a change to this module), and

    python -m training.model_card --unpack runs/mini-6

turns the shipped model back into a run directory, for a next stage's --init.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
from pathlib import Path

from .handwritten import NEW, set_aside
from .train import RUN_KEYS, machine, parser

NOTES = "<!-- notes: written by hand, kept when the card is rendered again -->"
MODEL_FILES = ("config.json", "model.safetensors", "tokenizer.json")
RUN_DIR = "runs/mini"   # the shipped run's directory in the printed commands
SHIPPED_DIR = "clover_struct/models/clover-mini"   # --init from the shipped model, as a command names it
SHIPPED = Path(__file__).resolve().parents[1] / "clover_struct" / "models" / "clover-mini"
# issue 4's bar for each score: (evaluation key, metric, at least)
TARGETS = [("synthetic", "field_em", 0.97), ("synthetic", "record_em", 0.90), ("heldout_family", "field_em", 0.90),
           ("real_dev", "valid_rate", 1.0), ("real_dev", "qline_location_validity_em", 0.98),
           ("dispatch", "field_em", 0.90), ("judgments", "accuracy", 0.95)]


def stage_summary(state: dict, last_log: dict | None, out: str, hardware: str | None = None) -> dict:
    """One training run: the command that reproduces it (into `out`), steps, time, machine."""
    args = state["args"]
    command = f"python -m training.train --out {out} --config {args['config']}"
    command += f" --minutes {args['minutes']:g}" if args.get("minutes") else f" --steps {args['steps']}"
    if state.get("device", "cpu") != "cpu":
        command += f" --device {state['device']}"
    defaults = vars(parser().parse_args(["--out", out]))
    for key in (k for k in RUN_KEYS if k not in ("config", "steps", "minutes")):   # those are in already
        value = args.get(key, defaults[key])
        if isinstance(value, dict):
            value = ",".join(f"{k}={v:g}" for k, v in value.items())
        if value != defaults[key]:   # only what differs from train.py's defaults, so the command reproduces the run
            command += f" --{key.replace('_', '-')} {value}"
    return {"command": command, "steps": state["step"], "minutes": round(state["elapsed"] / 60, 1),
            "machine": state.get("machine") or hardware or machine(), "args": args, "last_log": last_log}


def training_summary(run: Path, hardware: str | None) -> dict:
    """The run in `run`; a run started from another one's weights (--init) holds that one as
    `before`, and so on back to the first stage."""
    state = json.loads((run / "train_state.json").read_text())
    log = [json.loads(line) for line in (run / "train_log.jsonl").read_text().splitlines() if line.strip()]
    return _chain(state, log[-1] if log else None, RUN_DIR, hardware)


def _chain(state: dict, last_log: dict | None, out: str, hardware: str | None = None) -> dict:
    before, init = state.get("before"), state["args"].get("init")
    shipped = before and "command" in before   # started from the shipped model: its record, summed up already
    if before and (init in (RUN_DIR, SHIPPED_DIR) or Path(init).is_absolute()):
        # the one before gets a directory of its own: runs/mini-k for the k-th stage, one more
        # past a shipped record (whose 17th stage took runs/mini-18)
        chain = stages(before)
        init = f"{RUN_DIR}-{len(chain) + any('command' in s for s in chain)}"
        state = {**state, "args": {**state["args"], "init": init}}
    summary = stage_summary(state, last_log, out, hardware)
    if before:
        if shipped:   # its command now writes into the directory this stage starts from
            before = {k: v for k, v in before.items() if k != "parameters"}
            command = before["command"].replace(f"--out {RUN_DIR} ", f"--out {init} ", 1)
            summary["before"] = {**before, "command": command}
        else:
            summary["before"] = _chain(before, before.get("last_log"), init)
    return summary


def stages(t: dict) -> list[dict]:
    """The stages of a training summary, first first."""
    return (stages(t["before"]) if t.get("before") else []) + [t]


def machine_kind(stage: dict) -> str:
    """GPU or CPU: the device the stage's command names (a CPU run names none)."""
    device = re.search(r" --device (\S+)", stage["command"])
    return "GPU" if device and device[1] != "cpu" else "CPU"


def machine_minutes(training: dict) -> dict[str, tuple[float, list[str]]]:
    """Minutes of training on each kind of machine, with the machines of that kind, first first."""
    kinds: dict[str, tuple[float, list[str]]] = {}
    for s in stages(training):
        minutes, machines = kinds.get(machine_kind(s), (0.0, []))
        kinds[machine_kind(s)] = (minutes + s["minutes"], machines + [s["machine"]] * (s["machine"] not in machines))
    return {kind: (round(minutes, 1), machines) for kind, (minutes, machines) in kinds.items()}


def render(config: dict, training: dict, evaluation: dict) -> str:
    """The generated part of the card: every number in it is read from the three dicts."""
    c, t = config, training
    experts = f"{c['num_experts']} routed experts (top {c['num_experts_per_tok']}, width {c['moe_intermediate_size']})"
    params = t.get("parameters")
    lines = [
        "# clover-mini",
        "",
        f"clover-mini is the model that ships inside clover-struct: a block diffusion model of {params:,} parameters,",
        "trained by us from scratch on generated data only, that extracts NOTAM, no-fly-zone and drone-dispatch",
        "records. `clover_struct.load_model()` with no argument loads it, and `clover_struct.extract` uses it",
        "when given no model.",
        "",
        "## Intended use",
        "",
        "Extracting NOTAM, no-fly-zone and drone-dispatch records from English and Chinese notices and messages,",
        "as the embedded default model of clover-struct, on a CPU. It is a demonstration and test model, not for",
        "operational flight decisions.",
        "",
        "## Limitations",
        "",
        *_limitations(evaluation),
        "",
        "## Architecture",
        "",
        f"Clover (block diffusion on a Qwen3.5-MoE style backbone): {c['num_hidden_layers']} layers "
        f"({', '.join('DeltaNet' if k == 'linear_attention' else 'attention' for k in c['layer_types'])}), "
        f"hidden size {c['hidden_size']}, {experts} plus a shared expert, "
        f"{params:,} parameters, vocabulary {c['vocab_size']}, denoising block {c['block_size']} tokens.",
        "",
        "## Data",
        "",
        "Generated by `training/generate.py` (ICAO NOTAMs in several layouts, English and Chinese drone",
        "notices, dispatch messages, linked-judgment cases), drawn fresh for every step from seeds of",
        "1,000,000 and up (`copy`: labelled-copy drills, `training/copying.py`). The held-out family",
        "(`notam_aftn`) is never drawn; no real notice is read in training.",
        "",
        "## Training",
        "",
    ]
    chain = stages(t)
    if len(chain) > 1:
        lines += ["The first stage trains the tokenizer; each stage after it starts from the weights and tokenizer of",
                  "the one before, with a new optimizer and lr schedule.", ""]
    lines += ["| stage | machine | steps | minutes | lr | last loss |", "|---|---|---|---|---|---|"]
    for k, s in enumerate(chain, 1):
        loss = f"{s['last_log']['loss']:g}" if s.get("last_log") else "-"
        lines.append(f"| {k} | {machine_kind(s)} | {s['steps']:,} | {s['minutes']:g} | {s['args']['lr']:g} | {loss} |")
    reproduce = f"`python -m training.reproduce --out {RUN_DIR}`"
    lines += ["", f"The exact command of each stage is in training.json, and {reproduce} runs them all again.", "",
              "Minutes in all: " + ", ".join(f"{minutes:g} on {kind} ({'; '.join(machines)})"
                                             for kind, (minutes, machines) in machine_minutes(t).items()) + "."]
    lines += ["", "## Scores", "",
              "`python training/evaluate.py` (generated sets use evaluation seeds the training never draws):", "",
              "| set | n | valid | field EM | record EM | s / record |", "|---|---|---|---|---|---|"]
    for name, r in evaluation.items():
        if r and "field_em" in r:
            record = f"{r['record_em']:.3f}" if "record_em" in r else "-"
            seconds = f"{r['seconds_per_record']:.2f}" if "seconds_per_record" in r else "-"
            lines.append(f"| {name} | {r['n']} | {_rate(r['valid_rate'])} | {_rate(r['field_em'])} | {record} | {seconds} |")
    for name, r in evaluation.items():
        if r and r.get("per_field"):
            lines += ["", f"Per field, {name}: " + ", ".join(f"{k} {v:.2f}" for k, v in r["per_field"].items()) + "."]
    if j := evaluation.get("judgments"):
        m = j["model_only"]
        lines += ["", f"Linked judgments ({j['n']} cases, 8 answers each), decided as the library decides them "
                      f"(`clover_struct.airspace.flight.judge_flight`, as `examples/dispatch_demo.py` does): the model "
                      f"extracts the zones of the {j['notices']} notices ({j['failed_notices']} failed), code computes "
                      f"the geometric answers from them (does the route enter a zone, within its limits, while in "
                      f"force; right {j['facts_accuracy']:.3f}) and gives them as known facts, and the model decides "
                      f"the rest from the notices geometry cannot rule out: accuracy {j['accuracy']:.3f} decided "
                      f"jointly ({j['violations']} rule violations), {j['alone_accuracy']:.3f} answering each open "
                      f"question on its own ({j['alone_violations']} cases violating a rule); from the true zones' "
                      f"geometry, {j['accuracy_true_geometry']:.3f}. The model alone answering all eight from the "
                      f"text, geometry included: {m['accuracy']:.3f} jointly ({m['violations']} rule violations), "
                      f"{m['alone_accuracy']:.3f} each on its own ({m['alone_violations']} cases violating a rule)."]
    if evaluation.get("real_dev"):
        lines += ["", "Real dev notices, Q-line fields, location and validity: "
                      f"{_rate(evaluation['real_dev']['qline_location_validity_em'])} field exact match."]
    lines += ["", "Against the targets of issue 4:", ""]
    for key, metric, bar in TARGETS:
        got = (evaluation.get(key) or {}).get(metric)
        if got is not None:
            shown = _rate(got) if (round(got, 3) >= bar) == (got >= bar) else f"{got:.4f}"   # 0.9795, not 0.980
            lines.append(f"- {key} {metric}: {shown} (target {bar:g}) {'met' if got >= bar else 'NOT met'}")
    return "\n".join(lines) + "\n"


HANDWRITTEN = (("handwritten", "Hand-written notices of kinds the other sets lack"),
               ("fresh", "Hand-written notices in wordings the generator lacks"),
               ("unseen", "Hand-written notices in wordings the generator lacks, never used to change it"))


def _limitations(evaluation: dict) -> list[str]:
    """The measured limitations, each with its figure from the evaluation (a set it lacks is left out)."""
    lines = ["- It was trained on generated data only. "]
    if real := evaluation.get("real_dev"):
        lines[0] += (f"Real notices are scored here only for the NOTAM Q-line fields, location and validity ({real['n']} "
                     f"real dev notices, {_rate(real['qline_location_validity_em'])} field exact match); its scores on "
                     "real notices outside those fields and no-fly zones, and on real drone notices and dispatch "
                     "messages, are not established by this card.")
    else:
        lines[0] += "No real notice is scored here: its scores on real notices are not established by this card."
    if r := evaluation.get("real_zones"):
        shapes = ", ".join(f"{s}s {v['iou90']:.3f} of {v['n']}" for s, v in r["by_shape"].items())
        lines.append(f"- Real no-fly-zone notices (`real_zones`, {r['n']} hand-checked): footprints at IoU >= 0.9 "
                     f"{r['iou90']:.3f} ({shapes}), a valid zone from {r['valid_rate']:.3f}, limits, validity and "
                     f"uas_only {r['field_em']:.3f} exact match.")
    if g := evaluation.get("negatives"):
        lines.append(f"- Text that defines no zone (`negatives`): no zone on {g['notams_no_zone']:.3f} of "
                     f"{g['n_notams']} dev NOTAMs that define none and on {g['garbage_no_zone']:.3f} of "
                     f"{g['n_garbage']} garbage texts.")
    for key, what in HANDWRITTEN:
        if h := evaluation.get(key):
            wrong = "; ".join(f"{k} ({', '.join(v)})" for k, v in h["misses"].items())
            lines.append(f"- {what} (`{key}`, training/handwritten.py): {h['right']} of {h['n']} read right"
                         + (f"; wrong: {wrong}." if wrong else "."))
    if c := (evaluation.get("real_zones") or {}).get("confidence"):
        lines.append(f"- Confidence: setting aside the records whose least sure field is below {c['threshold']:g} "
                     f"(`trace.lowest`; `clover-struct extract --min-confidence {c['threshold']:g}`) sets aside "
                     f"{c['wrong_set_aside']:.3f} of the {c['n_wrong']} real-zone records wrong in some respect and "
                     f"keeps {c['right_kept']:.3f} of the {c['n_right']} right ones.")
        if sets := [k for k in NEW if "lowest" in evaluation.get(k, {})]:   # (older evaluations lack it)
            a = set_aside([evaluation[k] for k in sets], c["threshold"])
            lines[-1] += (f" On the notices in new wordings ({', '.join(f'`{k}`' for k in sets)}) it "
                          f"sets aside {a['wrong_set_aside']} of the {a['n_wrong']} wrong and {a['right_set_aside']} of "
                          f"the {a['n_right']} right.")
    if z := evaluation.get("zones"):
        weakest = "; weakest fields " + ", ".join(f"{f} {v}" for f, v in _weakest(z, 3)) if z.get("per_field") else ""
        lines.append(f"- No-fly-zone notices (`zones`): field exact match {_rate(z['field_em'])}, a whole record "
                     f"right in {z['record_em']:.3f}{weakest}.")
    if d := evaluation.get("dispatch"):
        lines.append(f"- Dispatch messages (`dispatch`): field exact match {_rate(d['field_em'])}, but a whole record "
                     f"right in only {d['record_em']:.3f}.")
    if h := evaluation.get("heldout_family"):
        weakest = ("but its weakest field, {}, only {}".format(*_weakest(h, 1)[0]) if h.get("per_field") else
                   f"a whole record right in {h['record_em']:.3f}")
        lines.append(f"- The NOTAM layout never drawn in training (`heldout_family`): field exact match "
                     f"{_rate(h['field_em'])}, {weakest}.")
    if j := evaluation.get("judgments"):
        lines.append(f"- Flight judgments from the text alone, geometry included: accuracy "
                     f"{j['model_only']['accuracy']:.3f}; the library leaves the geometry to code, computed from the "
                     f"zones the model reads (`judge_flight`: {j['accuracy']:.3f}; from the true zones, "
                     f"{j['accuracy_true_geometry']:.3f}).")
    lines.append("- What is known to be wrong, and what each training stage changed: `training/LOG.md`.")
    return lines


def _weakest(result: dict, k: int) -> list[tuple[str, str]]:
    """The k lowest fields of a set, lowest first, each with its exact match as the card shows it."""
    return [(name, _rate(value)) for name, value in sorted(result["per_field"].items(), key=lambda kv: kv[1])[:k]]


def _rate(x: float) -> str:
    """Three decimals; four where three would round a miss up to a perfect 1.000."""
    return f"{x:.4f}" if x < 1 and round(x, 3) == 1 else f"{x:.3f}"


def write(run: Path, evaluation_file: Path, out: Path, hardware: str | None = None) -> Path:
    from safetensors.torch import load_file

    out.mkdir(parents=True, exist_ok=True)
    for name in MODEL_FILES:
        shutil.copyfile(run / name, out / name)
    parameters = sum(t.numel() for t in load_file(str(out / "model.safetensors")).values())
    training = {**training_summary(run, hardware), "parameters": parameters}
    (out / "training.json").write_text(json.dumps(training, indent=2) + "\n")
    shutil.copyfile(evaluation_file, out / "evaluation.json")
    return render_card(out)


def render_card(directory: Path, notes: str | None = None) -> Path:
    """MODEL_CARD.md in `directory` rendered again from the files beside it, followed by `notes`,
    or by the hand-written text after the NOTES marker of the card there now."""
    card = directory / "MODEL_CARD.md"
    if notes is None:
        notes = card.read_text().partition(NOTES)[2] if card.is_file() else "\n"
    card.write_text(render_dir(directory) + "\n" + NOTES + notes)
    return card


def unpack(model: Path, out: Path) -> Path:
    """A run directory holding a shipped model, for the next stage to start from (--init): its
    files, and its record as train_state.json (training.json turned back) and train_log.jsonl."""
    out.mkdir(parents=True, exist_ok=True)
    for name in MODEL_FILES:
        shutil.copyfile(model / name, out / name)
    summary = json.loads((model / "training.json").read_text())
    (out / "train_state.json").write_text(json.dumps(_state(summary), indent=2) + "\n")
    (out / "train_log.jsonl").write_text(json.dumps(summary["last_log"]) + "\n" if summary.get("last_log") else "")
    return out


def _state(summary: dict) -> dict:
    """The run state that stage_summary summarised, with the stages before it."""
    device = re.search(r" --device (\S+)", summary["command"])
    state = {"step": summary["steps"], "elapsed": summary["minutes"] * 60, "machine": summary["machine"],
             "device": device[1] if device else "cpu", "args": summary["args"]}
    if summary.get("before"):
        state["before"] = {**_state(summary["before"]), "last_log": summary["before"].get("last_log")}
    return state


def render_dir(directory: Path) -> str:
    read = lambda name: json.loads((directory / name).read_text())  # noqa: E731
    return render(read("config.json"), read("training.json"), read("evaluation.json"))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m training.model_card", description=__doc__.splitlines()[0])
    ap.add_argument("--run", type=Path, help="the training run directory")
    ap.add_argument("--evaluation", type=Path, help="evaluate.py --out FILE")
    ap.add_argument("--out", type=Path, default=SHIPPED)
    ap.add_argument("--hardware", help="the training machine, when the run did not record it")
    ap.add_argument("--unpack", type=Path, metavar="DIR",
                    help="instead: make DIR a run directory holding the model in --out, to --init a next stage")
    ap.add_argument("--render", action="store_true",
                    help="instead: render the card in --out again from the files beside it, keeping its notes")
    args = ap.parse_args(argv)
    if args.unpack:
        print(unpack(args.out, args.unpack))
    elif args.render:
        print(render_card(args.out))
    elif args.run and args.evaluation:
        print(write(args.run, args.evaluation, args.out, args.hardware))
    else:
        ap.error("give --run and --evaluation, --unpack DIR or --render")
    return 0


if __name__ == "__main__":
    sys.exit(main())
