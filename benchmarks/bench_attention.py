"""Multi-head attention speed: the library's fast path against ``torch.nn.MultiheadAttention``.

Forward + backward, causal, B=16, D=256, H=8 at T=128 and T=512 on the current device. Both layers are timed
interleaved in one run (this machine is shared and noisy) and the median ratio is printed with its target.
Also checks that the reference path is only taken when weights are requested.

    python benchmarks/bench_attention.py [--quick]
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch
import torch.nn.functional as F

from transformer_lib.attention import causal_mask
from transformer_lib.multihead import MultiHeadAttention

from benchkit import figure, verdict


def fwd_bwd(fn, x):
    x.grad = None
    fn(x).sum().backward()


def time_pair(ours, theirs, x, repeats: int, inner: int):
    """Interleave the two layers ``repeats`` times; return per-call median seconds of each."""
    a, b = [], []
    for _ in range(2):  # warm-up
        fwd_bwd(ours, x)
        fwd_bwd(theirs, x)
    for _ in range(repeats):
        for fn, out in ((ours, a), (theirs, b)):
            start = time.perf_counter()
            for _ in range(inner):
                fwd_bwd(fn, x)
            if x.is_cuda:
                torch.cuda.synchronize()
            out.append((time.perf_counter() - start) / inner)
    return statistics.median(a), statistics.median(b)


def reference_path_only_with_weights() -> bool:
    calls = []
    real = F.scaled_dot_product_attention

    def spy(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    F.scaled_dot_product_attention = spy
    try:
        mha = MultiHeadAttention(32, 4)
        x = torch.randn(2, 8, 32)
        mha(x, causal=True)
        fast_calls = len(calls)
        mha(x, causal=True, return_weights=True)
        return fast_calls == 1 and len(calls) == 1
    finally:
        F.scaled_dot_product_attention = real


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats (smoke test)")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = parser.parse_args(argv)
    torch.manual_seed(0)
    device = torch.device(args.device)
    B, D, H = 16, 256, 8
    repeats, inner = (3, 1) if args.quick else (7, 3)
    results = {}
    for T in (128, 512):
        ours = MultiHeadAttention(D, H).to(device).train()
        torch_mha = torch.nn.MultiheadAttention(D, H, batch_first=True).to(device).train()
        mask = ~causal_mask(T, device=device)  # PyTorch's convention: True = NOT allowed

        def theirs(x, layer=torch_mha, mask=mask):
            return layer(x, x, x, attn_mask=mask, is_causal=True, need_weights=False)[0]

        def mine(x, layer=ours):
            return layer(x, causal=True)

        x = torch.randn(B, T, D, device=device, requires_grad=True)
        t_ours, t_theirs = time_pair(mine, theirs, x, repeats, inner)
        ratio = t_ours / t_theirs
        results[T] = ratio
        figure(f"mha_fwd_bwd_ratio_T{T}", f"{ratio:.3f}", f"ours {t_ours * 1e3:.1f} ms / torch.nn.MultiheadAttention "
               f"{t_theirs * 1e3:.1f} ms, target <= 0.9", verdict(ratio <= 0.9))
    ok = reference_path_only_with_weights()
    figure("reference_path_only_with_weights", str(ok), result="PASS" if ok else "FAIL")
    return results


if __name__ == "__main__":
    main()
