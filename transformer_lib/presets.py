"""Settings that a chapter shares with code outside the book.

Chapter 11 trains a character-level, decoder-only language model; ``benchmarks/bench_lm_throughput.py`` measures
the training throughput of the same model. Both import its settings from here, so the benchmark measures the
chapter's model and the two cannot drift apart. The dicts are read-only; copy one (``dict(LM_CPU_CONFIG)``) to
change a value.
"""
from __future__ import annotations

from types import MappingProxyType

__all__ = ["LM_CPU_CONFIG", "LM_GPU_CONFIG"]

#: The settings of chapter 11 on a CPU, where it trains in well under a minute on 2 cores.
LM_CPU_CONFIG = MappingProxyType(dict(
    d_model=64, n_layers=2, n_heads=4, block_size=128, batch_size=16, steps=500, lr=3e-3,
    d_ff=256, warmup_steps=50, position="rotary", dropout=0.0))

#: The settings of chapter 11 on a GPU, a character-level model of the size of nanoGPT's Shakespeare model. 1,000
#: steps: 4,000 overtrained. On one H200 (the run of 2026-11-27, 13 chapters sharing the GPU) the best validation loss,
#: 1.175 nats/char, came at step 400 of 4,000; afterwards it rose to 2.1 while the training loss fell to 0.11 at the
#: end (146 passes over the training text; 1,000 steps make 37). 1,000 steps, with the same warm-up, learning rate
#: and model, have not yet run on a GPU.
LM_GPU_CONFIG = MappingProxyType(dict(
    d_model=384, n_layers=6, n_heads=6, block_size=256, batch_size=64, steps=1_000, lr=1e-3,
    d_ff=1536, warmup_steps=200, position="rotary", dropout=0.1))
