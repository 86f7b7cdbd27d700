"""Tests for the library's shared input checks (transformer_lib.checks) that plotting, diagrams and the explorers
share: array coercion and labels. Each error names the argument, what was received and what was expected."""
import numpy as np
import pytest
import torch

from transformer_lib.checks import as_numpy, as_tensor, check_labels


def test_as_numpy_reads_tensors_arrays_and_sequences():
    w = torch.rand(2, 3, requires_grad=True, dtype=torch.float64)
    arr = as_numpy("weights", w, ndim=2)
    assert arr.dtype == np.float32 and arr.shape == (2, 3)  # a tensor is read as float32 for drawing
    mask = as_numpy("mask", torch.ones(2, 2, dtype=torch.bool))
    assert mask.dtype == bool
    table = np.arange(6.0).reshape(2, 3)
    assert as_numpy("table", table, ndim=(2, 3)) is table  # an array is taken as it is
    assert as_numpy("x", [1, 2, 3], ndim=1).tolist() == [1, 2, 3]


@pytest.mark.parametrize("value, ndim, error, message", [
    ([[1.0], [1.0, 2.0]], None, TypeError, r"x must be a torch.Tensor, a numpy array or a \(nested\) sequence of "
                                           r"numbers, got list"),
    ("abc", None, TypeError, "x must hold real numbers, got dtype <U3"),
    (np.ones(2, dtype=complex), None, TypeError, "x must hold real numbers, got dtype complex128"),
    (np.ones((2, 3)), 1, ValueError, r"x must have 1 dimensions, got 2 \(shape \(2, 3\)\)"),
    (torch.ones(2, 3), (1, 3), ValueError, r"x must have 1 or 3 dimensions, got 2 \(shape \(2, 3\)\)"),
    (np.ones((2, 0)), None, ValueError, r"x is empty \(shape \(2, 0\)\); expected at least one element"),
])
def test_as_numpy_refuses_what_it_cannot_draw(value, ndim, error, message):
    with pytest.raises(error, match=message):
        as_numpy("x", value, ndim)


def test_as_tensor_is_an_exact_float64_cpu_copy():
    x = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    t = as_tensor("x", x, ndim=2)
    assert t.dtype == torch.float64 and not t.requires_grad and torch.equal(t, x.detach())  # no float32 step
    assert as_tensor("x", np.arange(4, dtype=np.int64), ndim=1).dtype == torch.float64
    assert as_tensor("x", [[0.5, 0.25]], ndim=(2, 3)).tolist() == [[0.5, 0.25]]
    with pytest.raises(TypeError, match="x must hold real numbers, got dtype torch.bool"):
        as_tensor("x", torch.ones(2, dtype=torch.bool))
    with pytest.raises(TypeError, match="x must hold real numbers, got dtype torch.bool"):
        as_tensor("x", np.ones(2, dtype=bool))
    with pytest.raises(ValueError, match=r"x must have 2 dimensions, got 1 \(shape \(4,\)\)"):
        as_tensor("x", torch.ones(4), ndim=2)
    with pytest.raises(ValueError, match="x is empty"):
        as_tensor("x", torch.ones(0, 3))


def test_check_labels():
    assert check_labels("x_labels", None, 3) is None
    assert check_labels("x_labels", ("a", 1, None), 3) == ["a", "1", "None"]
    assert check_labels("x_labels", np.array(["a", "b"]), 2) == ["a", "b"]
    assert check_labels("titles", torch.tensor([3, 4])) == ["3", "4"]
    assert check_labels("words", ["a", "b"], (1, 8), noun="words") == ["a", "b"]
    with pytest.raises(ValueError, match="x_labels has 2 labels but the key axis of weights has 3"):
        check_labels("x_labels", ["a", "b"], 3, "the key axis of weights")
    with pytest.raises(ValueError, match="words must hold between 2 and 8 words, got 1"):
        check_labels("words", ["a"], (2, 8), noun="words")
    with pytest.raises(ValueError, match="tokens has no tokens; expected at least one"):
        check_labels("tokens", [], noun="tokens")
    with pytest.raises(TypeError, match=r"tokens must be a sequence of tokens, got the string 'abc' \(use .split\(\)\)"):
        check_labels("tokens", "abc", noun="tokens")
    with pytest.raises(TypeError, match="x_labels must be a sequence of labels, got set"):
        check_labels("x_labels", {"a", "b"}, 2)
