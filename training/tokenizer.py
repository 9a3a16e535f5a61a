"""Train clover-mini's tokenizer: byte-level BPE with single digits, single capitals, whole CJK characters.

- Byte level, so any UTF-8 text can be written exactly (layout.py refuses fixed text
  that does not round-trip, and slots may hold characters the corpus never showed).
- Every digit is its own token (``Digits(individual_digits=True)``): coordinates,
  times and heights are copied digit by digit, and a number slot's automaton never
  has to reason about merged digit runs.
- Every capital letter is its own token too: ICAO codes (`ZGZU`, `QRDCA`, item A
  locations) are copied letter by letter, through 26 tokens the model sees all the
  time. With letter pairs merged (`UH`, `QK`, ... several hundred rare tokens), a
  model that copied dates and coordinates at ~90% copied 0 of 56 letter codes (copy
  drills) and 0% of FIRs, Q-codes and locations. Texts cost 19-41% more tokens.
- Each Han character is split off on its own before byte-level BPE, so frequent
  ones become whole tokens and a merge never spans two characters; rare ones stay
  as their bytes.
- Every whitespace character is its own piece before byte-level BPE, so a word
  never carries the space before it: `Q) ZSHA/` and the slot value `ZSHA` hold the
  same tokens, and copying a value is copying tokens. (With GPT-2 style pieces,
  ` ZSHA` and `ZSHA` split differently: a model at step 500 of training had not
  learned to copy a single field; texts cost ~21% more tokens this way.)
- Special tokens `<|pad|>` (id 0), `<|mask|>` (1), `<|endoftext|>` (2), found by name.

The corpus is `corpus()`: generated texts of every kind (the held-out family is
never drawn), the gold records as JSON and the prompt template's words. Seeds are
below 1_000_000, apart from training's example seeds and from evaluation's.
Knows nothing of models; `python -m training.tokenizer OUT.json` writes one.
"""

from __future__ import annotations

import json
import random
import sys
from collections.abc import Iterable, Iterator

from tokenizers import Regex, decoders, models, pre_tokenizers, trainers
from tokenizers import Tokenizer as HFTokenizer

SPECIAL_TOKENS = ("<|pad|>", "<|mask|>", "<|endoftext|>")
VOCAB_SIZE = 3072
CORPUS_SEED = 424_242        # < 1_000_000: never a training-example seed
CORPUS_PER_KIND = 3000
# The words of api.prompt_ids' template (schema titles come from the schemas).
PROMPT_WORDS = "schema: {title}\ntext:\n{text}\nrecord:\n"


def train_tokenizer(texts: Iterable[str], vocab_size: int = VOCAB_SIZE) -> HFTokenizer:
    tok = HFTokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(r"\p{Han}|\s|[A-Z]"), behavior="isolated"),
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
    ])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=2, special_tokens=list(SPECIAL_TOKENS),
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(texts, trainer)
    return tok


def corpus(per_kind: int = CORPUS_PER_KIND, seed: int = CORPUS_SEED) -> Iterator[str]:
    """Generated texts, their gold records as JSON, and the prompt template's words."""
    from clover_struct.schemas import DispatchJudgments, DispatchMessage, NoFlyZone, Notam

    from .generate import KINDS, sample

    for schema in (Notam, NoFlyZone, DispatchMessage, DispatchJudgments):
        title = schema.model_json_schema().get("title", "record")
        yield PROMPT_WORDS.format(title=title, text="")
    rng = random.Random(seed)
    for _ in range(per_kind):
        for kind in KINDS:
            _, text, gold = sample(kind, rng)
            yield text
            data = gold.model_dump(mode="json", by_alias=True)
            yield json.dumps(data, ensure_ascii=False)
            yield json.dumps(data, ensure_ascii=False, separators=(", ", ": "))


def build(vocab_size: int = VOCAB_SIZE, per_kind: int = CORPUS_PER_KIND) -> HFTokenizer:
    return train_tokenizer(corpus(per_kind), vocab_size)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python -m training.tokenizer OUT/tokenizer.json", file=sys.stderr)
        return 2
    build().save(argv[0])
    return 0


if __name__ == "__main__":
    sys.exit(main())
