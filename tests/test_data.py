"""Tests of transformer_lib.data: the book's tasks, corpus and tokenizers."""
import doctest

import pytest
import torch

from transformer_lib import data as D


@pytest.fixture(scope="module")
def corpus():
    return D.load_corpus()


@pytest.fixture(scope="module")
def splits():
    return D.translation_splits(seed=0, n_train=600, n_valid=100, n_test=100, n_long=100)


# ------------------------------------------------------------------------------------------------ vocab
def test_special_ids():
    assert (D.PAD_ID, D.BOS_ID, D.EOS_ID, D.UNK_ID) == (0, 1, 2, 3)
    v = D.Vocab(["a", "b"])
    assert v.itos[:4] == ["<pad>", "<bos>", "<eos>", "<unk>"]
    assert len(v) == 6 and v.stoi["a"] == 4


def test_vocab_round_trip_and_save_load(tmp_path):
    v = D.Vocab.from_tokens([["the", "dog", "ran"], ["the", "cat"]])
    assert v.tokens[0] == "the"  # most frequent first
    ids = v.encode(["the", "cat", "ran"], add_bos=True, add_eos=True)
    assert ids[0] == D.BOS_ID and ids[-1] == D.EOS_ID
    assert v.decode(ids) == ["the", "cat", "ran"]
    assert v.decode(torch.tensor(ids), strip_special=False)[0] == "<bos>"
    assert v.encode(["zebra"]) == [D.UNK_ID]
    v.save(tmp_path / "v.json")
    assert D.Vocab.load(tmp_path / "v.json") == v


def test_vocab_min_freq():
    v = D.Vocab.from_tokens([["a", "a", "b"]], min_freq=2)
    assert "a" in v and "b" not in v


def test_vocab_bad_input():
    v = D.Vocab(["a"])
    with pytest.raises(ValueError, match=r"tokens\[1\] = 'zebra' is not in the vocabulary"):
        v.encode(["a", "zebra"], strict=True)
    with pytest.raises(TypeError, match="tokens must be a list of token strings"):
        v.encode("a b")
    with pytest.raises(ValueError, match="tokens contains a duplicate"):
        D.Vocab(["a", "a"])
    with pytest.raises(ValueError, match="tokens contains a special token"):
        D.Vocab(["<pad>"])
    with pytest.raises(ValueError, match=r"ids\[0\] = 99 is outside the vocabulary"):
        v.decode([99])
    with pytest.raises(ValueError, match="min_freq must be a positive int"):
        D.Vocab.from_tokens([["a"]], min_freq=0)


# ------------------------------------------------------------------------------------------------ tokenizers
def test_corpus_is_long_and_deterministic(corpus):
    assert len(corpus) > 400_000
    assert D.load_corpus() == corpus


def test_char_tokenizer_round_trip(tmp_path, corpus):
    text = corpus[:20_000]
    tok = D.CharTokenizer.fit(text)
    assert len(tok) == 4 + len(set(text))
    assert tok.decode(tok.encode(text)) == text
    assert tok.encode("\u2603") == [D.UNK_ID]
    tok.save(tmp_path / "c.json")
    assert D.CharTokenizer.load(tmp_path / "c.json").encode(text[:500]) == tok.encode(text[:500])


def test_pretokenize_keeps_every_character(corpus):
    text = corpus[:50_000] + " snake_case  x\t\n 3.14 don't "
    pieces = D.pretokenize(text)
    assert "".join(pieces) == text
    assert " Python" in D.pretokenize("use Python")  # the space stays attached to the next word


def test_bpe_round_trip_vocab_size(tmp_path, corpus):
    text = corpus[:100_000]
    tok = D.BPETokenizer.train(text, vocab_size=512)
    assert len(tok) == 512
    ids = tok.encode(text)
    assert tok.decode(ids) == text
    assert len(ids) < 0.5 * len(text)  # merges compress
    held_out = corpus[200_000:210_000]
    unseen = set(held_out) - set(text)
    if not unseen:
        assert tok.decode(tok.encode(held_out)) == held_out
    assert tok.encode("\u2603") == [D.UNK_ID]
    tok.save(tmp_path / "b.json")
    again = D.BPETokenizer.load(tmp_path / "b.json")
    assert again.encode(text[:3000]) == tok.encode(text[:3000])
    assert again.merges == tok.merges


def test_bpe_is_deterministic_and_merges_most_frequent_pair():
    tok = D.BPETokenizer.train("aaab aaab aaab", vocab_size=4 + 3 + 1)  # alphabet ' ', a, b + one merge
    assert tok.merges == [("a", "a")]
    assert D.BPETokenizer.train("hello world " * 5, 20).merges == D.BPETokenizer.train("hello world " * 5, 20).merges


def naive_bpe_merges(text, n_merges):
    """BPE the slow, obvious way: recount every adjacent pair of every word before each merge."""
    from collections import Counter

    words = Counter(tuple(w) for w in D.pretokenize(text))
    merges = []
    for _ in range(n_merges):
        counts = Counter()
        for w, f in words.items():
            for p in zip(w, w[1:]):
                counts[p] += f
        if not counts:
            break
        pair = min(counts, key=lambda p: (-counts[p], p))  # most frequent; ties: the smaller pair
        merges.append(pair)
        merged_words = Counter()
        for w, f in words.items():
            out, i = [], 0
            while i < len(w):
                if i + 1 < len(w) and (w[i], w[i + 1]) == pair:
                    out.append(w[i] + w[i + 1])
                    i += 2
                else:
                    out.append(w[i])
                    i += 1
            merged_words[tuple(out)] += f
        words = merged_words
    return merges


def test_bpe_incremental_counts_give_the_naive_merges(corpus):
    """The trainer updates pair counts only for the words a merge touches (that is what makes it fast); it must
    learn exactly the merges of recounting everything before each merge."""
    text = corpus[:10_000]
    tok = D.BPETokenizer.train(text, vocab_size=4 + len(set(text)) + 100)
    assert len(tok.merges) >= 100
    assert tok.merges == naive_bpe_merges(text, len(tok.merges))


def test_tokenizer_bad_input():
    with pytest.raises(ValueError, match="text is empty"):
        D.BPETokenizer.train("")
    with pytest.raises(ValueError, match="text is empty"):
        D.CharTokenizer.fit("")
    with pytest.raises(ValueError, match="vocab_size must be at least 7"):
        D.BPETokenizer.train("abc", vocab_size=5)
    with pytest.raises(TypeError, match="text must be a str"):
        D.CharTokenizer.fit("abc").encode(["a"])


# ------------------------------------------------------------------------------------------------ LM data
def test_lm_splits_and_batches(corpus):
    text = corpus[:30_000]
    tok = D.CharTokenizer.fit(text)
    train, valid = D.lm_splits(text, tok, valid_fraction=0.1)
    assert train.dtype == torch.long and train.dim() == 1
    assert len(train) + len(valid) == len(text) and len(valid) == 3000
    g = torch.Generator().manual_seed(0)
    x, y = D.lm_batch(train, 8, 32, g)
    assert x.shape == y.shape == (8, 32)
    assert torch.equal(x[:, 1:], y[:, :-1])  # y is x shifted by one
    x2, _ = D.lm_batch(train, 8, 32, torch.Generator().manual_seed(0))
    assert torch.equal(x, x2)
    batches = list(D.lm_batches(train, 4, 16, n_batches=3, seed=1))
    assert len(batches) == 3 and batches[0][0].shape == (4, 16)
    assert torch.equal(batches[0][0], next(iter(D.lm_batches(train, 4, 16, n_batches=3, seed=1)))[0])


def test_lm_bad_input():
    data = torch.arange(10)
    with pytest.raises(ValueError, match="block_size 10 is too long for data of 10 tokens"):
        D.lm_batch(data, 2, 10)
    with pytest.raises(ValueError, match="block_size 50 is too long"):
        D.lm_batches(data, 2, 50)
    with pytest.raises(ValueError, match="batch_size must be a positive int, got 0"):
        D.lm_batch(data, 0, 4)
    with pytest.raises(TypeError, match="data must have a int dtype"):
        D.lm_batch(data.float(), 2, 4)
    with pytest.raises(ValueError, match="valid_fraction must be in"):
        D.lm_splits("abcdef", D.CharTokenizer.fit("abcdef"), valid_fraction=1.5)
    with pytest.raises(ValueError, match="text is empty"):
        D.lm_splits("", D.CharTokenizer.fit("a"))


# ------------------------------------------------------------------------------------------------ translation
def test_translation_determinism():
    a = D.make_translation_data(50, seed=3)
    assert a == D.make_translation_data(50, seed=3)
    assert a != D.make_translation_data(50, seed=4)


def test_translation_lengths_unique_and_reference():
    pairs = D.make_translation_data(300, seed=1, min_len=5, max_len=12, max_depth=2)
    assert all(5 <= len(s) <= 12 for s, _ in pairs)
    assert len({" ".join(s) for s, _ in pairs}) == 300
    assert all(t == D.reference_translate(s) for s, t in pairs)


def test_translation_max_depth_zero_has_no_relative_clause():
    pairs = D.make_translation_data(100, seed=0, max_depth=0, max_len=10)
    assert not any(w in ("who", "that") for s, _ in pairs for w in s)


def test_splits_disjoint_and_long(splits):
    keys = {k: {" ".join(s) for s, _ in splits[k]} for k in ("train", "valid", "test", "long")}
    assert len(keys["train"]) == 600 and len(keys["valid"]) == 100 and len(keys["test"]) == 100
    assert not keys["train"] & keys["valid"] and not keys["train"] & keys["test"]
    assert not keys["valid"] & keys["test"]
    train_max = max(len(s) for s, _ in splits["train"])
    assert train_max <= 20 and min(len(s) for s, _ in splits["test"]) >= 3
    assert max(len(s) for s, _ in splits["test"]) <= 20
    assert min(len(s) for s, _ in splits["long"]) > train_max
    assert max(len(s) for s, _ in splits["long"]) <= 30
    sv, tv = splits["src_vocab"], splits["tgt_vocab"]
    for k in ("train", "valid", "test", "long"):
        for s, t in splits[k]:
            assert D.UNK_ID not in sv.encode(s) and D.UNK_ID not in tv.encode(t)
    assert 30 <= len(sv) - 4 <= 60


def test_reference_translation_examples():
    assert D.reference_translate("the chef slept".split()) == ["ti", "kuvo", "ka", "dora"]
    assert D.reference_translate("some dogs saw a big cat") == ["mu", "haniri", "ka", "na", "mesu", "gor",
                                                                "mo", "mira" + "n"]
    # object relative clause, placed before its noun; its verb agrees with its own subject (the birds)
    assert D.reference_translate("the chef that the birds fed ran") == \
        ["ti", "pirori", "ka", "famen", "ti", "kuvo", "ka", "kura"]
    # centre embedding (never sampled, but the rule covers it): each verb agrees with its own subject
    assert D.reference_translate("the dogs that the cat who ran saw slept") == \
        ["kure", "ti", "mesu", "ka", "mire", "ti", "haniri", "ka", "doran"]
    # a prepositional phrase becomes a postpositional phrase before the noun
    assert D.reference_translate("the dog near the river slept") == ["ti", "nalu", "ko", "ti", "hani", "ka", "dora"]


def test_agreement_across_relative_clause():
    """The main verb (last target word) agrees with the subject, not with the nouns in between."""
    sg = D.reference_translate("the chef who saw the dogs near the river laughed")
    pl = D.reference_translate("the chefs who saw the dog near the river laughed")
    assert sg[-1] == "haha" and pl[-1] == "hahan"
    assert sg[:-1] != pl[:-1]
    for src, tgt in D.make_translation_data(200, seed=5, min_len=8, max_len=20):
        first_noun = next(w for w in src if w in D.TRANSLATION_LEXICON["nouns"] or w[:-1] in
                          D.TRANSLATION_LEXICON["nouns"])
        subject_plural = first_noun.endswith("s")
        assert tgt[-1].endswith("an" if subject_plural else "a") and not tgt[-1].endswith("en")


def test_reordering_happens():
    """The verb goes last, and gold alignments cross (the translation is not monotonic)."""
    pairs = D.make_translation_data(200, seed=2, min_len=6, max_len=20)
    crossing = 0
    for src, tgt in pairs:
        a = D.alignment(src)
        assert a.shape == (len(tgt), len(src)) and (a.sum(1) >= 1).all()
        first_src = a.argmax(1)  # first aligned source word of each target word
        crossing += bool((first_src[1:] < first_src[:-1]).any())
        verb = src.index(next(w for w in src if w in D.TRANSLATION_LEXICON["transitive_verbs"]
                              or w in D.TRANSLATION_LEXICON["intransitive_verbs"]))
        assert verb >= 2
    assert crossing == len(pairs)


def test_reference_translate_rejects_ungrammatical():
    with pytest.raises(ValueError, match=r"src_tokens\[2\]: expected a verb"):
        D.reference_translate("the chef the dog".split())
    with pytest.raises(ValueError, match="does not agree"):
        D.reference_translate("a chefs slept".split())


def test_translation_bad_input():
    with pytest.raises(ValueError, match="n must be a positive int, got 0"):
        D.make_translation_data(0)
    with pytest.raises(ValueError, match="max_len must be >= min_len, got max_len=4 < min_len=8"):
        D.make_translation_data(5, min_len=8, max_len=4)
    with pytest.raises(ValueError, match="no sentence of length 40..50"):
        D.make_translation_data(5, min_len=40, max_len=50, max_depth=1)
    with pytest.raises(ValueError, match="could only generate"):
        D.make_translation_data(1000, min_len=3, max_len=3)
    with pytest.raises(TypeError, match="seed must be an int"):
        D.make_translation_data(5, seed="0")


def test_docstring_examples_are_true():
    from transformer_lib.data import batching, tasks, tokenizers, translation

    results = [doctest.testmod(module, verbose=False) for module in (batching, tasks, translation, tokenizers)]
    assert sum(r.attempted for r in results) >= 3 and all(r.failed == 0 for r in results)


def test_describe_translation_shows_examples():
    text = D.describe_translation(3)
    assert text.count("\n  -> ") == 3


# ------------------------------------------------------------------------------------------------ seq2seq batches
def test_seq2seq_batch_layout(splits):
    pairs = splits["train"][:5]
    sv, tv = splits["src_vocab"], splits["tgt_vocab"]
    b = D.make_seq2seq_batch(pairs, sv, tv)
    src, tgt = b
    assert src.shape == (5, max(len(s) for s, _ in pairs))
    assert tgt.shape == (5, max(len(t) for _, t in pairs) + 2)
    assert (tgt[:, 0] == D.BOS_ID).all()
    for row, (s, t) in zip(range(5), pairs):
        assert tgt[row, len(t) + 1] == D.EOS_ID and (tgt[row, len(t) + 2:] == D.PAD_ID).all()
        assert tv.decode(tgt[row]) == t and sv.decode(src[row]) == s
        assert b.src_mask[row].sum() == len(s)
    assert torch.equal(b.tgt_in, tgt[:, :-1]) and torch.equal(b.tgt_out, tgt[:, 1:])


def test_pad_sequences():
    out = D.pad_sequences([[5, 6, 7], [8]])
    assert out.tolist() == [[5, 6, 7], [8, 0, 0]] and out.dtype == torch.long
    with pytest.raises(ValueError, match="sequences is empty"):
        D.pad_sequences([])


def test_iterate_batches(splits):
    pairs, sv, tv = splits["train"], splits["src_vocab"], splits["tgt_vocab"]
    one_epoch = list(D.iterate_batches(pairs, sv, tv, batch_size=64, seed=0))
    assert len(one_epoch) == 10 and sum(b.src.shape[0] for b in one_epoch) == 600
    again = list(D.iterate_batches(pairs, sv, tv, batch_size=64, seed=0))
    assert all(torch.equal(a.src, b.src) for a, b in zip(one_epoch, again))
    assert len(list(D.iterate_batches(pairs, sv, tv, 64, n_batches=25, drop_last=True))) == 25
    grouped = D.batches_by_length(pairs, 32, seed=0)
    assert sorted(i for g in grouped for i in g) == list(range(600))
    spread = [max(len(pairs[i][0]) for i in g) - min(len(pairs[i][0]) for i in g) for g in grouped]
    assert max(spread) <= 2
    by_len = list(D.iterate_batches(pairs, sv, tv, 32, by_length=True))
    assert sum(b.src.shape[0] for b in by_len) == 600
    with pytest.raises(ValueError, match="batch_size must be a positive int, got 0"):
        D.iterate_batches(pairs, sv, tv, batch_size=0)
    with pytest.raises(ValueError, match="pairs is empty"):
        D.make_seq2seq_batch([], sv, tv)


# ------------------------------------------------------------------------------------------------ agreement
@pytest.mark.parametrize("distance", [0, 1, 2, 5, 13])
@pytest.mark.parametrize("max_prefix", [0, 4])
def test_agreement_exact_distance_and_labels(distance, max_prefix):
    x, y, vocab = D.make_agreement_data(200, distance, seed=0, max_prefix=max_prefix)
    assert x.shape == (200, max_prefix + distance + 2) and y.shape == (200,)
    assert x.dtype == torch.long and y.dtype == torch.long
    assert set(y.tolist()) == {0, 1}
    nouns = D.TRANSLATION_LEXICON["nouns"]
    subject_positions = set()
    for row, label in zip(x.tolist(), y.tolist()):
        length = sum(i != D.PAD_ID for i in row)
        assert all(i != D.PAD_ID for i in row[:length]) and all(i == D.PAD_ID for i in row[length:])  # right-padded
        words = vocab.decode(row[:length])
        start = words.index("the")  # the prefix holds neither "the" nor a noun
        assert start <= max_prefix and not any(w.rstrip("s") in nouns for w in words[:start])
        subject = words[start + 1]
        subject_positions.add(start + 1)
        assert len(words) - (start + 2) == distance  # exactly `distance` words between the subject and the verb
        assert label == int(subject.endswith("s")) and subject.rstrip("s") in nouns
        for w in words[start + 2:]:  # every attractor has the other number
            if w.rstrip("s") in nouns:
                assert w.endswith("s") != bool(label)
    # the subject's position varies over every prefix length (a model cannot find it by position alone)
    assert subject_positions == set(range(1, max_prefix + 2))


def test_agreement_without_prefix_is_unpadded():
    x, y, vocab = D.make_agreement_data(100, 7, seed=3, max_prefix=0)
    assert x.shape == (100, 9) and not (x == D.PAD_ID).any()
    assert all(vocab.decode(row)[0] == "the" for row in x.tolist())


def test_agreement_determinism_and_shared_vocab():
    x1, y1, v1 = D.make_agreement_data(50, 6, seed=1)
    x2, y2, v2 = D.make_agreement_data(50, 6, seed=1)
    assert torch.equal(x1, x2) and torch.equal(y1, y2)
    assert not torch.equal(x1, D.make_agreement_data(50, 6, seed=2)[0])
    assert D.make_agreement_data(5, 20, seed=0)[2] == v1 == D.make_agreement_data(5, 20, max_prefix=0)[2]
    with pytest.raises(ValueError, match="distance must be a non-negative int, got -1"):
        D.make_agreement_data(5, -1)
    with pytest.raises(ValueError, match="max_prefix must be a non-negative int, got -2"):
        D.make_agreement_data(5, 3, max_prefix=-2)
    with pytest.raises(TypeError, match="max_prefix must be an int, got float 1.5"):
        D.make_agreement_data(5, 3, max_prefix=1.5)


# ------------------------------------------------------------------------------------------------ retrieval and lookback
def test_retrieval_labels():
    n, seq_len = 300, 64
    x, y = D.make_retrieval_data(n, seq_len, seed=0, n_keys=4)
    vocab_size = D.retrieval_vocab_size()
    value0 = vocab_size - 16
    key0 = value0 - 16
    assert x.shape == (n, seq_len) and y.shape == (n,)
    assert x.max() < vocab_size and x.min() >= 4
    assert (x[:, -2] == 4).all()
    for row, label in zip(x.tolist(), y.tolist()):
        key = row[-1]
        body = row[:-2]
        assert sum(key0 <= t < value0 for t in body) == 4  # four distinct keys, no stray key tokens
        pos = body.index(key)
        assert body[pos + 1] == value0 + label
    x2, y2 = D.make_retrieval_data(n, seq_len, seed=0, n_keys=4)
    assert torch.equal(x, x2) and torch.equal(y, y2)
    with pytest.raises(ValueError, match="seq_len must be >= 2 \\* n_keys \\+ 2 = 10"):
        D.make_retrieval_data(4, 9, n_keys=4)
    with pytest.raises(ValueError, match="n_keys must be <= n_key_types"):
        D.make_retrieval_data(4, 64, n_keys=20)


def test_lookback_targets():
    x, y = D.make_lookback_data(10, 32, lookback=3, seed=0, vocab_size=20)
    assert x.shape == y.shape == (10, 32)
    assert (y[:, :3] == D.IGNORE_INDEX).all()
    assert torch.equal(y[:, 3:], x[:, :-3])
    assert x.min() >= 4 and x.max() < 20
    assert torch.equal(x, D.make_lookback_data(10, 32, 3, seed=0, vocab_size=20)[0])
    with pytest.raises(ValueError, match="lookback must be < seq_len, got lookback=8, seq_len=8"):
        D.make_lookback_data(2, 8, 8)
    with pytest.raises(ValueError, match="n must be a positive int, got 0"):
        D.make_lookback_data(0, 8, 2)


def test_subject_verb_distance_counts_the_subject_modifiers():
    from transformer_lib.data import subject_verb_distance
    assert subject_verb_distance("the chef slept") == 1
    assert subject_verb_distance("the old chef slept".split()) == 1          # the adjective precedes the noun
    assert subject_verb_distance("the chef near the house slept") == 4      # a prepositional phrase: 3 words
    assert subject_verb_distance("the chef who saw the dogs slept") == 5
    assert subject_verb_distance("the dogs that the old king fed chased a cat") == 6
    # the object's modifiers come after the verb and do not count
    assert subject_verb_distance("a girl liked the dogs that the king fed") == 1
    with pytest.raises(ValueError, match="src_tokens"):
        subject_verb_distance("the chef the")
