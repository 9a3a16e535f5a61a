"""The airspace demo: 20 notices -> 3D no-fly zones -> GeoJSON, a map and a route check.

    from clover_struct.demo import run
    run()                       # embedded clover-mini; writes zones.geojson and airspace.png
    python examples/airspace_demo.py --model DIR --out OUT

The notices (notices.jsonl) were written for this demo: ICAO NOTAMs whose item E gives
a precise zone, and plain-language drone notices in English and Chinese, all around
Shanghai so one map shows them and one route crosses several. The figure needs
matplotlib (the `demo` extra); without it the demo still extracts, checks and writes GeoJSON.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

NOTICES_PATH = Path(__file__).parent / "notices.jsonl"

_CJK = re.compile(r"[\u4e00-\u9fff]")


def load_notices(path: str | Path = NOTICES_PATH) -> list[dict]:
    """[{"id": ..., "text": ...}, ...] from a JSON-lines file."""
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def kind_of(text: str) -> str:
    """'zh' (Chinese drone notice), 'icao' (a NOTAM with Q) and E) items) or 'en' (plain English)."""
    if _CJK.search(text):
        return "zh"
    if re.search(r"^Q\) ", text, re.M) and re.search(r"^E\) ", text, re.M):
        return "icao"
    return "en"


def run(model=None, out_dir=".", batch_size: int = 20, **options) -> dict:
    """See airspace.run (imported lazily: the demo loads torch only when it runs)."""
    from .airspace import run as _run

    return _run(model, out_dir, batch_size, **options)


def main(argv: list[str] | None = None) -> int:
    from .airspace import main as _main

    return _main(argv)


__all__ = ["NOTICES_PATH", "load_notices", "kind_of", "run", "main"]
