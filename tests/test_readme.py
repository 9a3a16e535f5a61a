"""Every code block of the README runs as written, from the repository root, on the embedded model.

`make test` is not run here: it is what CI runs, and it runs this test. Nor are blocks fenced
`python not-run` (Spark and Dask, which the tests do not install): they are compiled only."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FENCES = re.findall(r"^```(\w*)( not-run)?\n(.*?)^```", (ROOT / "README.md").read_text(encoding="utf-8"),
                    re.M | re.S)
BLOCKS = [(lang, code) for lang, skip, code in FENCES if not skip]
RUN = [(lang, code) for lang, code in BLOCKS if not code.startswith("make test")]


def test_every_block_has_a_language_that_runs():
    assert len(BLOCKS) >= 8 and all(lang in ("python", "sh") for lang, _ in BLOCKS)
    assert all(lang == "python" for lang, skip, _ in FENCES if skip)


@pytest.mark.parametrize("code", [code for _, skip, code in FENCES if skip])
def test_the_blocks_not_run_compile(code):
    compile(code, "README.md", "exec")


@pytest.mark.slow
@pytest.mark.parametrize("lang,code", RUN, ids=[f"block{k}-{lang}" for k, (lang, _) in enumerate(RUN)])
def test_the_block_runs(lang, code):
    command = [sys.executable, "-c", code] if lang == "python" else ["bash", "-euo", "pipefail", "-c", code]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600,
                          env={**__import__("os").environ, "PYTHON": sys.executable})
    assert done.returncode == 0, f"{done.stdout[-2000:]}\n{done.stderr[-4000:]}"
