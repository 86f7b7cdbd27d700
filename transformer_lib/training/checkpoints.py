"""Checkpoints: a model's weights (safetensors), the optimizer's state and the step, saved and loaded together.

Saving happens on the main process only under ``torchrun``; a model wrapped in ``DistributedDataParallel`` or
compiled is saved and loaded through the module it wraps. ``transformer_lib.training`` re-exports the public names.
"""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Optional

import torch
import torch.distributed as dist
from torch import nn

from .distributed import is_main_process, unwrap_model

__all__ = ["save_checkpoint", "load_checkpoint"]


def _paths(path) -> tuple:
    path = Path(path)
    if path.suffix != ".safetensors":
        raise ValueError(f"path must end in '.safetensors', got {str(path)!r}")
    return path, path.with_suffix(".json"), path.with_suffix(".optim.pt")


def save_checkpoint(path, model: nn.Module, optimizer=None, step: Optional[int] = None, config=None) -> Path:
    """Save weights (safetensors), metadata (JSON sidecar) and optionally the optimizer state.

    ``model.safetensors`` gets the weights (tied tensors are stored once), ``model.json`` the step and config,
    ``model.optim.pt`` the optimizer state. Only the main process writes; the others wait for it.

    Args:
        path: the weights file, ending in ``.safetensors``; its folder is created.
        model: the module (DDP / compiled wrappers are unwrapped).
        optimizer: whose ``state_dict`` to save, or None.
        step: the number of updates done, stored in the metadata.
        config: a dataclass or JSON-serialisable dict describing the model, stored in the metadata.

    Returns:
        The weights path.
    """
    from safetensors.torch import save_model

    weights, sidecar, optim = _paths(path)
    if dataclasses.is_dataclass(config) and not isinstance(config, type):
        config = dataclasses.asdict(config)
    if config is not None and not isinstance(config, dict):
        raise TypeError(f"config must be a dataclass instance, a dict or None, got {type(config).__name__}")
    meta = {"step": step, "config": config}
    try:
        text = json.dumps(meta, indent=2)
    except TypeError as err:
        raise TypeError(f"config must be JSON-serialisable: {err}") from err
    if is_main_process():
        weights.parent.mkdir(parents=True, exist_ok=True)
        save_model(unwrap_model(model), str(weights), force_contiguous=True)
        sidecar.write_text(text)
        if optimizer is not None:
            torch.save(optimizer.state_dict(), optim)
    if dist.is_available() and dist.is_initialized():
        dist.barrier()
    return weights


def load_checkpoint(path, model: nn.Module, optimizer=None) -> dict:
    """Load a checkpoint written by :func:`save_checkpoint` into ``model`` (and ``optimizer``) in place.

    Args:
        path: the ``.safetensors`` weights file.
        model: a module of the same architecture; weights land on its current device.
        optimizer: an optimizer over ``model``'s parameters to restore, or None.

    Returns:
        dict: the metadata, ``{'step': int | None, 'config': dict | None}``.
    """
    from safetensors.torch import load_model

    weights, sidecar, optim = _paths(path)
    if not weights.exists():
        raise FileNotFoundError(f"no checkpoint at {str(weights)!r}")
    model = unwrap_model(model)
    first = next(iter(model.parameters()), None)
    device = first.device if first is not None else torch.device("cpu")
    load_model(model, str(weights), strict=True, device=str(device))
    meta = json.loads(sidecar.read_text()) if sidecar.exists() else {"step": None, "config": None}
    if optimizer is not None:
        if not optim.exists():
            raise FileNotFoundError(f"optimizer state requested but {str(optim)!r} does not exist "
                                    "(save_checkpoint was called without optimizer)")
        optimizer.load_state_dict(torch.load(optim, map_location=device, weights_only=True))
    return meta
