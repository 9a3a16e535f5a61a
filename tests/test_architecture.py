"""The layers import downward only: the engine stands alone, importing a part loads only what it needs."""

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_engine_imports_nothing_of_the_library():
    for path in (ROOT / "clover_struct" / "engine").glob("*.py"):
        text = path.read_text()
        assert not re.search(r"^\s*(from|import)\s+clover_struct\b", text, re.M), path.name
        assert not re.search(r"^\s*from\s+\.\.", text, re.M), path.name


def loaded_after(statement: str) -> set[str]:
    code = f"import sys; {statement}; print(' '.join(sorted(m for m in sys.modules if m.startswith('clover_struct'))))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    return set(out.split())


def test_the_engine_model_loads_nothing_of_the_extraction_stack():
    loaded = loaded_after("import clover_struct.engine.model")
    assert not {m for m in loaded if not m.startswith(("clover_struct.engine",))} - {"clover_struct"}, loaded


def test_the_package_face_is_lazy():
    assert loaded_after("import clover_struct") == {"clover_struct"}
    assert "clover_struct.api" in loaded_after("from clover_struct import extract")


def test_the_server_stack_loads_only_for_serve():
    code = "import sys, clover_struct.cli, clover_struct.api; print(sorted(m for m in ('starlette', 'uvicorn', " \
           "'clover_struct.serve') if m in sys.modules))"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip() == "[]"


def test_ray_and_pandas_load_only_when_asked():
    code = ("import sys; from clover_struct import Extractor, cli; import clover_struct.distributed; "
            "print(' '.join(m for m in ('ray', 'pandas') if m in sys.modules))")
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip() == ""
