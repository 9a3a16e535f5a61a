"""engine/ and schemas/ install as clover_struct.engine and clover_struct.schemas, editable or not."""

import subprocess
import sys
import zipfile
from pathlib import Path

import clover_struct.engine

ROOT = Path(__file__).resolve().parents[1]


def test_editable_install_maps_the_top_level_folders():
    assert Path(clover_struct.engine.__file__).resolve().parent == ROOT / "engine"


def test_wheel_puts_everything_under_clover_struct(tmp_path):
    subprocess.run([sys.executable, "-m", "pip", "wheel", str(ROOT), "--no-deps", "--no-build-isolation",
                    "-q", "-w", str(tmp_path)], check=True, capture_output=True)
    wheel = next(tmp_path.glob("clover_struct-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    assert "clover_struct/engine/model.py" in names and "clover_struct/schemas/__init__.py" in names
    assert not [n for n in names if n.startswith(("engine/", "schemas/"))]
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    code = "import clover_struct.engine.model, clover_struct.engine, sys; print(clover_struct.engine.__file__)"
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True,
                         env={"PYTHONPATH": str(site), "PATH": ""}, check=True).stdout
    assert out.strip().startswith(str(site))
