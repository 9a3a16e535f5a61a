"""Ready-made domain schemas: ICAO NOTAMs, 3D no-fly zones, drone dispatch and judgments.

Each schema's fields are what an extractor can copy from a text; derived values (decimal
degrees, metres, UTC datetimes) are properties computed by ``units``. Knows nothing of
models or decoding.
"""

from .airspace import NoFlyZone
from .dispatch import DispatchJudgments, DispatchMessage, judgment_rules_hold
from .notam import Notam

__all__ = ["DispatchJudgments", "DispatchMessage", "NoFlyZone", "Notam", "judgment_rules_hold"]
