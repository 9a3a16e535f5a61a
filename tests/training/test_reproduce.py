"""training/reproduce.py: the recorded stages run again in order, by step count, resumable."""

import json

from safetensors.torch import load_file

from training import reproduce as R
from training import train as T


def recorded(steps=(2, 2)):
    """A training summary like the shipped training.json, of tiny stages; the first by minutes."""
    summary = None
    for k, n in enumerate(steps):
        args = {"config": "tiny", "mix": {"notam": 1.0, "judgment": 1.0}, "batch_tokens": 1500, "lr": 1e-3,
                "warmup": 2, "seed": k, "steps": None if k == 0 else n, "minutes": 7.0 if k == 0 else None,
                "objective": "diffusion", "warm_steps": 1 if k == 0 else 0, "warm_mix": {"copy": 1.0}}
        summary = {"steps": n, "args": args, "before": summary, "minutes": 30.0 * (k + 1),
                   "command": "python -m training.train --out runs/mini" + " --device cuda" * (k == 0)}
    return summary


def model_dir(tmp_path, tokenizer_path, summary):
    d = tmp_path / "model"
    d.mkdir()
    (d / "training.json").write_text(json.dumps(summary))
    (d / "tokenizer.json").write_bytes(tokenizer_path.read_bytes())
    return d


def test_the_shipped_stages_print_by_step_count_and_the_twin_causally(capsys):
    shipped = R.stages(json.loads((R.SHIPPED / "training.json").read_text()))
    R.main(["--out", "runs/x", "--twin", "--device", "cuda", "--threads", "1", "--dry-run"])
    lines = capsys.readouterr().out.splitlines()[1:]
    assert len(lines) == len(shipped) >= 2
    for k, (line, stage) in enumerate(zip(lines, shipped), 1):
        assert f"--steps {stage['steps']} " in line and "--minutes" not in line
        assert "--objective causal" in line and "--device cuda" in line and line.endswith(" --threads 1")
        assert (f"--init runs/x-{k - 1}" in line) == (k > 1) and (f"--tokenizer {R.SHIPPED}" in line) == (k == 1)
    assert lines[-1].startswith(f"stage {len(shipped)}: training: python -m training.train --out runs/x ")


def test_the_time_the_recipe_takes_is_estimated_per_kind_of_machine_from_the_recorded_rates():
    # 2 steps of 1,500 tokens in 30 min on a GPU, 2 more in 60 min on a CPU: 6,000 tokens in all
    line = R.estimate(R.stages(recorded()))
    assert line.startswith("2 stages, 4 steps, 0M batch tokens")
    assert "about 1.0 h on GPU at its stages' rate (2 tokens/s)" in line
    assert "about 2.0 h on CPU at its stages' rate (1 tokens/s)" in line
    assert line.index("GPU") < line.index("CPU")


def test_stages_run_in_order_and_a_rerun_resumes_where_it_stopped(tokenizer_path, tmp_path, capsys):
    d, out = model_dir(tmp_path, tokenizer_path, recorded()), str(tmp_path / "run")
    R.main(["--out", out, "--model", str(d)])
    first = json.loads((tmp_path / "run-1" / "train_state.json").read_text())
    second = json.loads((tmp_path / "run" / "train_state.json").read_text())
    assert first["step"] == 2 and first["args"]["steps"] == 2 and first["args"]["minutes"] is None
    assert second["step"] == 2 and second["args"]["init"] == str(tmp_path / "run-1") and second["args"]["seed"] == 1
    # stop the last stage after one step, as a killed run would be, then run the whole again
    (tmp_path / "run").rename(tmp_path / "straight")
    argv = R.stage_argv(R.stages(recorded())[1], out, str(tmp_path / "run-1"), "cpu", False, d / "tokenizer.json")
    T.main(argv + ["--stop-after", "1"])
    capsys.readouterr()
    R.main(["--out", out, "--model", str(d)])
    said = capsys.readouterr().out
    assert f"stage 1: done ({tmp_path / 'run-1'}, step 2)" in said
    assert f"stage 2: resuming at step 1: python -m training.train --out {out} --resume" in said
    assert json.loads((tmp_path / "run" / "train_state.json").read_text())["step"] == 2
    a, b = (load_file(str(tmp_path / name / "model.safetensors")) for name in ("straight", "run"))
    worst = max((a[k] - b[k]).abs().max().item() for k in a)
    print(f"resumed stage against the uninterrupted one: largest weight difference {worst:.3g}")
    assert worst <= 1e-6


def test_a_stage_stopped_early_ends_the_command_and_the_next_stage_does_not_start(tokenizer_path, tmp_path,
                                                                                 monkeypatch, capsys):
    # a SIGTERM makes train save and return mid-stage; the next stage would start from half a stage
    d, out = model_dir(tmp_path, tokenizer_path, recorded()), str(tmp_path / "run")
    train_main = T.main
    monkeypatch.setattr(R.train, "main", lambda argv: train_main(argv + ["--stop-after", "1"]))
    assert R.main(["--out", out, "--model", str(d)]) == 1
    assert "stage 1: stopped at step 1 of 2; run the same command again to resume" in capsys.readouterr().out
    assert not (tmp_path / "run").exists()
