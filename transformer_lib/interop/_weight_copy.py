"""Copying weights into the library's modules: shared by the conversions from PyTorch
(:mod:`~transformer_lib.interop.pytorch`) and from Hugging Face (:mod:`~transformer_lib.interop.huggingface`)."""
from __future__ import annotations

from typing import Optional

import torch
from torch import nn


def _copy(dst: Optional[torch.Tensor], src: Optional[torch.Tensor], name: str) -> None:
    """dst <- src; a missing source bias means zero (PyTorch's bias=False), a missing norm weight means one."""
    if dst is None:
        if src is not None:
            raise ValueError(f"cannot copy {name}: the library module has no such parameter")
        return
    if src is None:
        if name.endswith("bias"):
            nn.init.zeros_(dst)
        else:
            nn.init.ones_(dst)
        return
    if dst.shape != src.shape:
        raise ValueError(f"cannot copy {name}: shape {tuple(src.shape)} into {tuple(dst.shape)}")
    dst.copy_(src)


def _copy_linear(dst: nn.Linear, weight: torch.Tensor, bias: Optional[torch.Tensor], name: str) -> None:
    _copy(dst.weight, weight, f"{name}.weight")
    _copy(dst.bias, bias, f"{name}.bias")


def _copy_norm(dst: nn.Module, src: nn.LayerNorm, name: str) -> None:
    _copy(dst.weight, src.weight, f"{name}.weight")
    _copy(dst.bias, src.bias, f"{name}.bias")


def _same_tensor(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Tied weights: one tensor, or equal values (tying them keeps the function)."""
    return a is b or (a.shape == b.shape and (a.data_ptr() == b.data_ptr() or torch.equal(a, b)))


def _like(module: nn.Module, source: nn.Module) -> nn.Module:
    """Move ``module`` to the source's device and floating dtype (before copying, so nothing is rounded)."""
    p = next((p for p in source.parameters() if p.is_floating_point()), None)
    return module if p is None else module.to(device=p.device, dtype=p.dtype)


def _norm_eps(*norms: nn.LayerNorm) -> float:
    eps = {n.eps for n in norms}
    if len(eps) > 1:
        raise ValueError(f"the layer norms of one layer must share eps to convert, got {sorted(eps)}")
    return eps.pop()
