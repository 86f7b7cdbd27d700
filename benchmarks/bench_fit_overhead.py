"""The training loop's overhead: `tl.training.fit` against a minimal hand-written loop on the same model and data.

Both loops do the same work per step (forward, cross-entropy, backward, gradient clipping, AdamW, a learning-rate
schedule); `fit` adds its bookkeeping: the History of every step's loss and gradient norm, the checks of the
batch and the loss, finiteness checks. On a GPU each value read back to the host makes the GPU wait, so `fit`
reads them once every `sync_every` steps (default 16 on a GPU); the hand loop reads nothing. Rounds of both are
timed interleaved in one process and the medians compared: steps per second of `fit` over the hand loop
(target ≥ 0.9).

    python benchmarks/bench_fit_overhead.py [--quick] [--device cpu|cuda] [--amp bf16]
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch
import torch.nn.functional as F

from transformer_lib import presets
from transformer_lib.models import DecoderLM, DecoderLMConfig
from transformer_lib.training import fit, lm_loss

from benchkit import figure, verdict

TARGET = 0.9


def make_model(settings: dict, device: torch.device) -> DecoderLM:
    torch.manual_seed(0)
    cfg = DecoderLMConfig(vocab_size=settings["vocab_size"], d_model=settings["d_model"],
                          n_heads=settings["n_heads"], n_layers=settings["n_layers"], d_ff=settings["d_ff"],
                          max_len=settings["block_size"], position=settings["position"])
    return DecoderLM(cfg).to(device)


def hand_loop(model, batches, steps: int, lr: float, device: torch.device, amp) -> None:
    """The loop a careful person writes by hand: no history, no checks, nothing read back. Its AdamW is the
    implementation fit's default uses (fused on CUDA, multi-tensor elsewhere), so the ratio measures the loop only."""
    opt = torch.optim.AdamW(model.parameters(), lr=lr,
                            **({"fused": True} if device.type == "cuda" else {"foreach": True}))
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0)
    model.train()
    for step in range(steps):
        x, y = (t.to(device, non_blocking=True) for t in batches[step])
        with (torch.autocast(device.type, dtype=torch.bfloat16) if amp == "bf16" else torch.autocast(
                device.type, enabled=False)):
            logits = model(x)
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()


def timed(fn, device: torch.device) -> float:
    if device.type == "cuda":
        torch.cuda.synchronize()
    start = time.perf_counter()
    fn()
    if device.type == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter() - start


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="few steps and rounds (smoke test)")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--amp", choices=["bf16"], default=None)
    parser.add_argument("--steps", type=int, default=None, help="steps per round (default 60; quick 10)")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    device = torch.device(args.device)
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    settings = dict(presets.LM_CPU_CONFIG if device.type == "cpu" else presets.LM_GPU_CONFIG)
    settings.setdefault("vocab_size", 108)
    settings.setdefault("position", "sinusoidal")
    steps = args.steps or (10 if args.quick else 60)
    rounds = 2 if args.quick else 5
    g = torch.Generator().manual_seed(0)
    batches = [(lambda x: (x[:, :-1], x[:, 1:]))(torch.randint(0, settings["vocab_size"],
                                                                 (settings["batch_size"], settings["block_size"] + 1),
                                                                 generator=g))
               for _ in range(steps)]
    model = make_model(settings, device)
    # warm-up of both (allocator, kernels)
    hand_loop(model, batches, 2, 1e-3, device, args.amp)
    fit(model, lambda s: batches[s], lm_loss, steps=2, lr=1e-3, device=device, amp=args.amp, progress=False)
    hand, lib = [], []
    for _ in range(rounds):                      # interleaved: a slower stretch of the machine hits both
        hand.append(timed(lambda: hand_loop(model, batches, steps, 1e-3, device, args.amp), device))
        lib.append(timed(lambda: fit(model, lambda s: batches[s], lm_loss, steps=steps, lr=1e-3, device=device,
                                     amp=args.amp, progress=False), device))
    ratio = statistics.median(hand) / statistics.median(lib)      # fit's steps/s over the hand loop's
    prefix = "cuda_" if device.type == "cuda" else ""
    figure(f"{prefix}fit_over_hand_loop_steps_per_s", f"{ratio:.2f}",
           f"fit steps/s over a minimal hand-written loop, {settings['d_model']}-wide {settings['n_layers']}-layer "
           f"DecoderLM, batch {settings['batch_size']}×{settings['block_size']}, {steps} steps × {rounds} rounds "
           f"on {device.type}, target ≥ {TARGET}", verdict(ratio >= TARGET))
    return {"ratio": ratio, "hand_s": statistics.median(hand) / steps, "fit_s": statistics.median(lib) / steps}


if __name__ == "__main__":
    main()
