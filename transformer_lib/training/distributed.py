"""Data-parallel training under ``torchrun``: which process this is, its slice of a batch, the process group.

:func:`~transformer_lib.training.loop.fit` uses these, so a chapter's training call runs unchanged on one process or
several (Li et al., 2020, "PyTorch Distributed"): every rank builds the same model and asks for the same global
batch; :func:`shard_batch` keeps rank ``r``'s contiguous slice of its rows. ``transformer_lib.training`` re-exports
the public names.
"""
from __future__ import annotations

import atexit
import os
from typing import Optional, Sequence

import torch
import torch.distributed as dist
from torch import nn

from ..checks import check_positive_int

__all__ = ["rank", "world_size", "is_main_process", "shard_batch", "unwrap_model"]

Batch = Sequence[torch.Tensor]


def rank() -> int:
    """This process's rank (0 when not distributed); read from the environment before ``fit`` initialises."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank()
    return int(os.environ.get("RANK", 0))


def world_size() -> int:
    """The number of processes training together (1 when not distributed)."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_world_size()
    return int(os.environ.get("WORLD_SIZE", 1))


def is_main_process() -> bool:
    """True on rank 0: the process that prints, plots and saves."""
    return rank() == 0


_current_rank, _current_world_size = rank, world_size  # shard_batch's arguments shadow the names


def _launched_distributed() -> bool:
    """True when a process group exists or ``torchrun`` started several processes."""
    if not dist.is_available():
        return False
    if dist.is_initialized():
        return dist.get_world_size() > 1
    env = os.environ
    return int(env.get("WORLD_SIZE", 1)) > 1 and "RANK" in env and "MASTER_ADDR" in env


def _init_distributed(device: torch.device) -> torch.device:
    """Create the default process group if needed (NCCL on CUDA, Gloo on CPU); return this rank's device."""
    if device.type == "cuda":
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0)))
        torch.cuda.set_device(device)
    if not dist.is_initialized():
        dist.init_process_group(backend="nccl" if device.type == "cuda" else "gloo")
        atexit.register(_destroy_process_group)
    return device


def _destroy_process_group() -> None:
    if dist.is_initialized():
        dist.destroy_process_group()


def shard_batch(batch: Batch, rank: Optional[int] = None, world_size: Optional[int] = None) -> tuple:
    """Rank ``rank``'s contiguous slice of a global batch along dim 0.

    Args:
        batch: a tuple or list of tensors sharing their first (batch) dimension B.
        rank: which slice; defaults to this process's rank.
        world_size: how many slices; defaults to the number of processes.

    Shapes:
        each tensor (B, ...) -> (B / world_size, ...).

    Returns:
        A tuple of views.
    """
    r = _current_rank() if rank is None else rank
    w = _current_world_size() if world_size is None else world_size
    check_positive_int("world_size", w)
    if not 0 <= r < w:
        raise ValueError(f"rank must be in [0, {w - 1}], got {r}")
    shards = []
    for i, t in enumerate(batch):
        if t.dim() == 0 or t.shape[0] % w:
            got = "a 0-dim tensor" if t.dim() == 0 else f"batch size {t.shape[0]} (shape {tuple(t.shape)})"
            raise ValueError(
                f"global batch element {i} has {got}; expected a batch size divisible by the world size {w} "
                f"so every process gets an equal share"
            )
        b = t.shape[0] // w
        shards.append(t[r * b:(r + 1) * b])  # (B / w, ...)
    return tuple(shards)


def unwrap_model(model: nn.Module) -> nn.Module:
    """The user's module inside a ``DistributedDataParallel`` and/or ``torch.compile`` wrapper."""
    while True:
        if isinstance(model, nn.parallel.DistributedDataParallel):
            model = model.module
        elif hasattr(model, "_orig_mod"):  # torch.compile's OptimizedModule
            model = model._orig_mod
        else:
            return model
