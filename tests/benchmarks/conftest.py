"""benchmarks/ and training/ are top-level folders of the repository, not installed packages."""

import sys
from pathlib import Path

ROOT = str(Path(__file__).resolve().parents[2])
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)
