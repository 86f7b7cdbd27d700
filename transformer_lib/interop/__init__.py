"""Interoperability: turn PyTorch's and Hugging Face's Transformer modules into the library's, weight for weight.

The converted module computes the same function as the original (in evaluation mode, up to float rounding), so a
chapter can check the library against code that millions of people use, and can load a pretrained checkpoint
(GPT-2, a Marian translation model) into the classes it has built. The conversions from PyTorch live in
:mod:`~transformer_lib.interop.pytorch`, those from Hugging Face in :mod:`~transformer_lib.interop.huggingface`;
every public name is importable from the package (``tl.interop.from_hf``, ``tl.interop.from_torch``).

Conventions at the boundary — read these before passing masks across:

* **Masks.** The library's masks are boolean with ``True`` = *may attend* (the convention of
  :func:`torch.nn.functional.scaled_dot_product_attention`). ``torch.nn.MultiheadAttention`` and
  ``nn.Transformer*Layer`` use the opposite: ``key_padding_mask`` ``True`` = *ignore this key*, a boolean
  ``attn_mask`` ``True`` = *not allowed*, and a float ``attn_mask`` is *added* to the scores (``-inf`` = not
  allowed). :func:`~transformer_lib.interop.pytorch.mask_from_torch` converts. Hugging Face's ``attention_mask``
  (B, S) with 1 = real token already has the library's meaning: pass ``attention_mask.bool()`` as ``src_mask``.
* **Layout.** The library is batch-first. A module converted from ``batch_first=False`` takes (B, T, D): transpose
  its (T, B, D) inputs.
* **Causality.** ``nn.TransformerDecoderLayer`` is causal only when given a ``tgt_mask``; the library's
  :class:`~transformer_lib.blocks.DecoderBlock` is causal by default (``causal=True``).
* **Fully masked rows.** A query with no key left gives NaN in PyTorch and zeros in the library.
"""
from .huggingface import (SUPPORTED_HF, from_hf, hub_available, load_pretrained_gpt2, load_pretrained_marian,
                          weights_from_hf)
from .pytorch import SUPPORTED_TORCH, from_torch, mask_from_torch, to_torch

__all__ = ["SUPPORTED_HF", "SUPPORTED_TORCH", "from_hf", "from_torch", "hub_available", "load_pretrained_gpt2",
           "load_pretrained_marian", "mask_from_torch", "to_torch", "weights_from_hf"]
