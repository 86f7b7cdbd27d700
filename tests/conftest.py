"""Shared test set-up: seeds, threads and the ``gpu`` marker."""
import random

import numpy as np
import pytest
import torch

# Tests use tiny tensors: one thread is faster than two and does not fight other processes for the cores.
torch.set_num_threads(1)


@pytest.fixture(autouse=True)
def _seed():
    random.seed(0)
    np.random.seed(0)
    torch.manual_seed(0)
    yield


def pytest_collection_modifyitems(config, items):
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs CUDA")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def cuda():
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    return torch.device("cuda")
