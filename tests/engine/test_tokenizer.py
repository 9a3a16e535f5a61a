from outlines_core import Index
from tokenizers import Tokenizer as HFTokenizer
from tokenizers import decoders, models, pre_tokenizers, trainers

from clover_struct.engine.tokenizer import Tokenizer

TEXT = ["WI 1.08NM RADIUS OF 512922N 0000551W", "禁止无人机飞行 半径 500 米", '{"fir": "EGTT", "ok": true}']


def byte_level_bpe():
    tok = HFTokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=["<|pad|>", "<|mask|>", "<|endoftext|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(TEXT * 20, trainer)
    return Tokenizer(tok)


def test_special_ids_are_found_by_name():
    tok = byte_level_bpe()
    assert (tok.pad_id, tok.mask_id, tok.eos_id) == (0, 1, 2)
    assert tok.special_ids == {0, 1, 2}


def test_token_bytes_spell_the_text():
    tok = byte_level_bpe()
    for text in TEXT:
        ids = tok.encode(text)
        assert b"".join(tok.token_bytes(i) for i in ids) == text.encode()
        assert tok.decode(ids) == text


def test_vocabulary_for_outlines_core_excludes_special_tokens():
    tok = byte_level_bpe()
    vocab = tok.vocabulary_map()
    assert not {0, 1, 2} & {i for ids in vocab.values() for i in ids}
    index = Index(r"[0-9]{6}[NS]", tok.outlines_vocabulary(eos_id=tok.pad_id))
    state = index.get_initial_state()
    for i in tok.encode("512922N"):
        state = index.get_next_state(state, i)
    assert index.is_final_state(state)
