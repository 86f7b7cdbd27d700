"""tl.data.bigram_loss: the counted baseline of the adequacy rule, against a direct count."""
import math

import pytest
import torch

from transformer_lib.data import bigram_loss


def test_bigram_loss_equals_a_direct_count():
    train = torch.tensor([0, 1, 0, 1, 0, 2, 0, 1])
    valid = torch.tensor([0, 1, 0, 2])
    V, a = 3, 0.1
    pairs = list(zip(train[:-1].tolist(), train[1:].tolist()))
    expected = []
    for x, y in zip(valid[:-1].tolist(), valid[1:].tolist()):
        n_xy = sum(1 for p in pairs if p == (x, y))
        n_x = sum(1 for p in pairs if p[0] == x)
        expected.append(-math.log((n_xy + a) / (n_x + a * V)))
    assert bigram_loss(train, valid, V, alphas=[a]) == pytest.approx(sum(expected) / len(expected))
    # the best α is the smallest loss over the grid
    assert bigram_loss(train, valid, V) == pytest.approx(min(bigram_loss(train, valid, V, alphas=[x])
                                                             for x in (0.01, 0.1, 1.0)))


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(train_ids=[0, 1]), TypeError, "train_ids must be a 1-D torch.long tensor, got list"),
    (dict(valid_ids=torch.tensor([0])), ValueError, "valid_ids must hold at least 2 ids, got 1"),
    (dict(vocab_size=0), ValueError, "vocab_size must be a positive int, got 0"),
    (dict(vocab_size=2), ValueError, r"train_ids must lie in \[0, vocab_size=2\), got ids from 0 to 2"),
    (dict(alphas=[0.0]), ValueError, "alphas must be a non-empty list of numbers > 0"),
])
def test_bigram_loss_bad_input(kwargs, error, match):
    args = dict(train_ids=torch.tensor([0, 1, 2, 1]), valid_ids=torch.tensor([0, 1]), vocab_size=3)
    args.update(kwargs)
    with pytest.raises(error, match=match):
        bigram_loss(**args)
