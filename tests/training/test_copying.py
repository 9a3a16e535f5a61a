"""Copy drills: every value sits right after its label's cue, absent labels are null."""

import random

from training.copying import CUES, LABELS, Copied, copy_example


def test_values_follow_their_cues_and_absent_labels_are_null():
    for seed in range(300):
        text, gold = copy_example(random.Random(seed))
        assert isinstance(gold, Copied)
        values = gold.model_dump()
        present = [label for label in LABELS if values[label.lower()] is not None]
        assert 3 <= len(present) <= 6
        style = next(i for i in range(3) if any(text.startswith(CUES[label][i] + " ") for label in present))
        for label in present:
            assert f"{CUES[label][style]} {values[label.lower()]}" in text
