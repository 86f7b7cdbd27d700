"""Tests of what chapter 10's budget sweep adds to the translation task: the far split of distant subjects."""
import pytest

from transformer_lib.data import translation as T


def test_long_range_data_keeps_distance_length_and_rule():
    pairs = T.make_long_range_data(60, min_distance=10, seed=1)
    assert len(pairs) == 60
    assert len({" ".join(s) for s, _ in pairs}) == 60                      # distinct sources
    for src, tgt in pairs:
        assert 10 <= T.subject_verb_distance(src) <= 18                   # farthest: max_len - 2
        assert 3 <= len(src) <= 20                                         # the training lengths
        assert tgt == T.reference_translate(src)


def test_long_range_data_max_distance_and_lengths():
    pairs = T.make_long_range_data(30, min_distance=5, max_distance=6, min_len=8, max_len=12, seed=2)
    assert {T.subject_verb_distance(s) for s, _ in pairs} <= {5, 6}
    assert all(8 <= len(s) <= 12 for s, _ in pairs)


def test_long_range_data_is_deterministic_and_excludes():
    a = T.make_long_range_data(20, min_distance=8, seed=3)
    assert a == T.make_long_range_data(20, min_distance=8, seed=3)
    assert a != T.make_long_range_data(20, min_distance=8, seed=4)
    banned = {" ".join(s) for s, _ in a[:10]}
    b = T.make_long_range_data(20, min_distance=8, seed=3, exclude=banned)
    assert not banned & {" ".join(s) for s, _ in b}


def test_translation_data_unchanged_by_the_shared_sampler():
    # make_translation_data and make_long_range_data share one rejection sampler; the book's splits must stay
    # byte-identical to those the chapters were stored with.
    first = T.make_translation_data(3, seed=0)
    assert [" ".join(s) for s, _ in first] == [
        "the happy farmer that a bird fed ran",
        "the girl in a park liked some kings who saw the farmers",
        "the dog that the old birds helped laughed",
    ]


@pytest.mark.parametrize("kwargs, message", [
    (dict(n=0, min_distance=5), "n must be"),
    (dict(n=5, min_distance=0), "min_distance must be"),
    (dict(n=5, min_distance=8, max_distance=6), "max_distance must be >= min_distance"),
    (dict(n=5, min_distance=19), "min_distance must be at most max_len - 2 = 18"),
    (dict(n=5, min_distance=5, seed="0"), "seed"),
    (dict(n=5, min_distance=5, min_len=9, max_len=4), "max_len must be >= min_len"),
])
def test_long_range_data_bad_input(kwargs, message):
    with pytest.raises((ValueError, TypeError), match=message):
        T.make_long_range_data(**kwargs)


def test_long_range_data_impossible_request_names_the_ranges():
    # Without relative clauses a subject is at most 4 words from its verb ("the chef near the house slept").
    with pytest.raises(ValueError, match=r"could only generate 0 of n=5 .* distance of 5\.\.18"):
        T.make_long_range_data(5, min_distance=5, max_depth=0)
