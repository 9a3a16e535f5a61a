"""The wheel holds the whole package (engine, schemas, the embedded model) and imports from anywhere."""

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_wheel_holds_the_package_and_the_embedded_model(tmp_path):
    subprocess.run([sys.executable, "-m", "pip", "wheel", str(ROOT), "--no-deps", "--no-build-isolation",
                    "-q", "-w", str(tmp_path)], check=True, capture_output=True)
    wheel = next(tmp_path.glob("clover_struct-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    for name in ("clover_struct/engine/model.py", "clover_struct/schemas/__init__.py",
                 "clover_struct/airspace/flight.py", "clover_struct/models/clover-mini/model.safetensors",
                 "clover_struct/demo/notices.jsonl"):
        assert name in names, name
    assert not [n for n in names if n.startswith(("tests/", "training/", "benchmarks/"))]
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    code = "import clover_struct.engine.model, clover_struct.engine, sys; print(clover_struct.engine.__file__)"
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True,
                         env={"PYTHONPATH": str(site), "PATH": ""}, check=True).stdout
    assert out.strip().startswith(str(site))
