"""Copy drills: every value sits right after its label's cue, absent labels are null; a
list's items stand in the text in the order of the record."""

import random

from training.copying import CUES, LABELS, Copied, Listed, copy_example, list_example


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


def test_list_items_are_written_in_order_and_of_one_form():
    seen_pairs = seen_single = False
    for seed in range(300):
        text, gold = list_example(random.Random(seed))
        assert isinstance(gold, Listed) and 3 <= len(gold.items) <= 16
        assert len({item.second is None for item in gold.items}) == 1   # one form per list
        at = 0
        for item in gold.items:   # each item's values after the one before
            for value in (item.first, item.second):
                if value is not None:
                    found = text.find(value, at)
                    assert found >= 0, (text, value)
                    at = found + len(value)
        seen_pairs |= gold.items[0].second is not None
        seen_single |= gold.items[0].second is None
    assert seen_pairs and seen_single
