"""Language-model training throughput (tokens/s) and its fraction of the machine's measured matmul peak (MFU).

The model is the decoder-only language model of chapter 11 at its CPU setting
(``transformer_lib.presets.LM_CPU_CONFIG``, which the chapter imports too; ``LM_GPU_CONFIG`` with ``--device cuda``),
or with ``--settings-from default`` the wider :data:`DEFAULT_CPU` / :data:`DEFAULT_GPU`, trained on the character-level corpus of ``transformer_lib.data.load_corpus`` through
``transformer_lib.training.fit`` exactly as a chapter trains it.

Model FLOPs per trained token (PaLM, Chowdhery et al. 2022, appendix B):

    6·N + 12·L·T·d

with N the parameters of the matrix multiplications (every ``nn.Linear`` weight; the output projection counts,
the embedding lookup does not), L layers, T the context length and d = d_model. 6·N is the forward (2 FLOPs per
multiply-add) and backward (twice the forward) of the weight matmuls; 12·L·T·d is the same for the two attention
matmuls q·kᵀ and weights·v over the full T × T square (causal kernels skip about half of it; the convention counts
it all). Model FLOP utilisation = tokens/s × FLOPs per token / peak FLOP/s, where the peak is measured in the same
run: a large matmul (2048 × 2048 float32 on CPU, 8192 × 8192 bfloat16 on CUDA) with the same threads. Training
chunks and peak measurements alternate (this machine is shared) and medians are compared.

    python benchmarks/bench_lm_throughput.py [--quick] [--json PATH]
    python benchmarks/bench_lm_throughput.py --device cuda --amp bf16 [--compile]     # GPU setting (Colab)
"""
from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

import torch
from torch import nn

import benchkit
from transformer_lib import presets
from benchkit import figure, verdict

#: A wider CPU setting than chapter 11's (``--settings-from default``).
DEFAULT_CPU = dict(d_model=128, n_layers=4, n_heads=4, block_size=128, batch_size=32)
#: A GPU-sized setting (nanoGPT's character-level Shakespeare model), for ``--device cuda --settings-from default``.
DEFAULT_GPU = dict(d_model=384, n_layers=6, n_heads=6, block_size=256, batch_size=64)
TARGET_MFU = 0.5
#: On a GPU (an H100 or H200 against its measured bf16 matmul peak) the target is lower: chapter 11's model is small
#: for such a chip, and the peak is that of an 8192-wide matmul.
TARGET_MFU_GPU = 0.30
#: The entries of a chapter-11 config that describe the model and the batch (the rest is the training schedule).
MODEL_KEYS = ("d_model", "n_layers", "n_heads", "block_size", "batch_size", "d_ff", "position", "dropout")


def settings_for(device: torch.device, source: str = "chapter") -> tuple:
    """The model and batch settings and where they came from: chapter 11's (``source='chapter'``, from
    :mod:`transformer_lib.presets`) or, with ``source='default'``, :data:`DEFAULT_CPU` / :data:`DEFAULT_GPU`."""
    gpu = device.type == "cuda"
    if source == "default":
        return dict(DEFAULT_GPU if gpu else DEFAULT_CPU), "defaults"
    name = "LM_GPU_CONFIG" if gpu else "LM_CPU_CONFIG"
    config = getattr(presets, name)
    return {k: config[k] for k in MODEL_KEYS if k in config}, f"chapter 11 (transformer_lib.presets.{name})"


def linear_parameters(model: nn.Module) -> int:
    """N: weights of every ``nn.Linear`` (the matmuls; a tied output projection counts once, as a matmul)."""
    return sum(m.weight.numel() for m in model.modules() if isinstance(m, nn.Linear))


def flops_per_token(n_linear: int, n_layers: int, block_size: int, d_model: int) -> int:
    """Training FLOPs per token, PaLM's 6·N + 12·L·T·d."""
    return 6 * n_linear + 12 * n_layers * block_size * d_model


def matmul_peak(device: torch.device, sizes, dtype: torch.dtype, calls: int = 3) -> dict:
    """Best FLOP/s of ``calls`` (n × n) @ (n × n) matmuls for each n of ``sizes``: ``{n: FLOP/s}``."""
    return {n: matmul_rate(device, n, n, n, dtype, calls) for n in sizes}


def matmul_rate(device, m: int, k: int, n: int, dtype, calls: int = 5) -> float:
    """Best FLOP/s of ``calls`` (m × k) @ (k × n) matmuls (after one untimed call)."""
    a = torch.randn(m, k, device=device, dtype=dtype)
    b = torch.randn(k, n, device=device, dtype=dtype)
    a @ b
    best = float("inf")
    for _ in range(calls):
        benchkit.synchronize(device)
        start = time.perf_counter()
        a @ b
        benchkit.synchronize(device)
        best = min(best, time.perf_counter() - start)
    return 2 * m * k * n / best


GEMM_OPS = ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm")


def step_profile(model, batch, optimizer) -> dict:
    """Where one training step's CPU time goes: self time of the matmuls, of the fused attention kernel, the rest.

    Returns:
        dict: seconds per category (``gemm``, ``attention``, ``other``, ``total``).
    """
    import transformer_lib as tl
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        loss, _ = tl.training.lm_loss(model, batch)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
    out = {"gemm": 0.0, "attention": 0.0, "other": 0.0}
    for event in prof.key_averages():
        key = ("gemm" if event.key in GEMM_OPS else
               "attention" if "scaled_dot_product" in event.key else "other")
        out[key] += event.self_cpu_time_total / 1e6
    out["total"] = sum(out.values())
    return out


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="two short rounds (smoke test)")
    parser.add_argument("--device", default="cpu", help="cpu (default) or cuda")
    parser.add_argument("--amp", default=None, choices=[None, "bf16"], help="bfloat16 autocast (CUDA)")
    parser.add_argument("--compile", action="store_true", help="torch.compile the model (fit(compile=True))")
    parser.add_argument("--settings-from", choices=["chapter", "default"], default="chapter",
                        help="chapter 11's setting (transformer_lib.presets, the default) or the wider built-in one")
    parser.add_argument("--rounds", type=int, default=None, help="measured rounds (default 4, quick 1)")
    parser.add_argument("--steps", type=int, default=None,
                        help="training steps per round (default 5 on a CPU, 30 on a GPU; quick 1)")
    parser.add_argument("--batch-size", type=int, default=None,
                        help="sequences per step instead of the setting's (the same model; a larger batch shows how "
                             "much of the gap to the peak is per-step overhead)")
    parser.add_argument("--threads", type=int, default=1,
                        help="CPU threads (default 1: on this shared 2-core machine a second thread mostly waits "
                             "for a busy core; --compare-threads measures it); 0 keeps torch's default")
    parser.add_argument("--compare-threads", action=argparse.BooleanOptionalAction, default=True,
                        help="also time short chunks with every core (CPU, --threads 1 only)")
    parser.add_argument("--json", type=Path, help="write the measurements here")
    args = parser.parse_args(argv)

    import transformer_lib as tl
    from transformer_lib.data import CharTokenizer, lm_batch, lm_splits, load_corpus
    from transformer_lib.models import DecoderLM, DecoderLMConfig

    device = torch.device(args.device)
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda: CUDA is not available on this machine")
    settings, source = settings_for(device, args.settings_from)
    if args.quick:  # same model, a smaller batch
        settings["batch_size"] = min(settings["batch_size"], 4)
    rounds = args.rounds or (1 if args.quick else 4)
    if args.batch_size is not None:
        if args.batch_size < 1:
            parser.error(f"--batch-size must be a positive number of sequences, got {args.batch_size}")
        settings["batch_size"] = args.batch_size
    # A GPU step takes milliseconds: rounds of 30 steps keep fit's per-call set-up out of the figure.
    steps = args.steps or (1 if args.quick else 30 if device.type == "cuda" else 5)
    B, T = settings["batch_size"], settings["block_size"]
    d, L = settings["d_model"], settings["n_layers"]

    text = load_corpus()
    tokenizer = CharTokenizer.fit(text)
    train, _ = lm_splits(text, tokenizer)
    torch.manual_seed(0)
    cfg = DecoderLMConfig(vocab_size=tokenizer.vocab_size, d_model=d, n_heads=settings["n_heads"], n_layers=L,
                          d_ff=settings.get("d_ff", 4 * d), max_len=T, dropout=settings.get("dropout", 0.0),
                          position=settings.get("position", "sinusoidal"))
    model = DecoderLM(cfg).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)

    def get_batch(step: int):
        return lm_batch(train, B, T, generator=torch.Generator().manual_seed(step))

    n_linear = linear_parameters(model)
    per_token = flops_per_token(n_linear, L, T, d)
    gpu = device.type == "cuda"
    target = TARGET_MFU_GPU if gpu else TARGET_MFU
    sizes, dtype = ((4096, 8192), torch.bfloat16) if gpu else ((512, 1024, 2048), torch.float32)
    if args.quick:
        sizes = sizes[:1]
    big = max(sizes)
    dname = str(dtype).replace("torch.", "")
    amp_note = f", autocast {args.amp}" if args.amp else ""
    print(f"device: {device} ({torch.get_num_threads()} CPU threads{amp_note}{', compiled' if args.compile else ''})"
          f"; setting from {source}: {settings}; vocab {tokenizer.vocab_size}, N (matmul weights) {n_linear:,}, "
          f"{per_token / 1e6:.2f} MFLOP per token")

    fit_kw = dict(optimizer=optimizer, device=device, amp=args.amp, compile=args.compile, progress=False)
    threads = torch.get_num_threads()
    compare = args.compare_threads and not gpu and threads == 1 and (os.cpu_count() or 1) > 1

    def chunk(r: int, n_steps: int) -> float:
        """Tokens per second of ``n_steps`` steps of ``fit``, by the wall clock: on a GPU the work is queued, so
        the device is synchronised before and after (fit's own ``History.seconds`` times the host's side)."""
        batches = (lambda s: get_batch(1000 * (r + 1) + s)) if r >= 0 else get_batch
        benchkit.synchronize(device)
        start = time.perf_counter()
        history = tl.training.fit(model, batches, tl.training.lm_loss, steps=n_steps, **fit_kw)
        benchkit.synchronize(device)
        return history.tokens / (time.perf_counter() - start)

    chunk(-1, 3 if args.compile else 1 if args.quick else 2)  # warm-up (and compilation)
    matmul_peak(device, sizes, dtype, calls=1)
    tok_s, peaks, ffs, tok_s_more = [], [], [], []
    for r in range(rounds):  # alternate: a training chunk, the peak matmuls, the model's own matmul
        tok_s.append(chunk(r, steps))
        peaks.append(matmul_peak(device, sizes, dtype, calls=5))
        # The feed-forward matmul, (B·T × d) @ (d × d_ff): how fast can a matrix of the model's size go?
        ffs.append(matmul_rate(device, B * T, d, cfg.d_ff or 4 * d, dtype))
        line = (f"  round {r + 1}/{rounds}: {tok_s[-1]:,.0f} tokens/s; matmul GFLOP/s "
                + ", ".join(f"{n}: {f / 1e9:.1f}" for n, f in peaks[-1].items())
                + f"; feed-forward matmul {ffs[-1] / 1e9:.1f}")
        if compare:  # the same training with every core: on a shared machine, threads wait for each other
            torch.set_num_threads(os.cpu_count())
            tok_s_more.append(chunk(100 + r, max(1, steps // 2)))
            torch.set_num_threads(threads)
            line += f"; with {os.cpu_count()} threads {tok_s_more[-1]:,.0f} tokens/s"
        print(line, flush=True)

    profile_s = step_profile(model, get_batch(7), optimizer) if not gpu else None

    # Peak: the best matmul of the round, the model's own feed-forward shape included. Each round's utilisation
    # uses the peak measured right after it; medians are reported.
    best = [max(max(p.values()), f) for p, f in zip(peaks, ffs)]
    mfus = [t * per_token / p for t, p in zip(tok_s, best)]
    mfus_big = [t * per_token / p[big] for t, p in zip(tok_s, peaks)]
    tokens_per_s, mfu, mfu_big = statistics.median(tok_s), statistics.median(mfus), statistics.median(mfus_big)
    peak = statistics.median(best)
    peak_by_size = {n: statistics.median(p[n] for p in peaks) for n in sizes}
    ff_rate = statistics.median(ffs)
    achieved = tokens_per_s * per_token
    ff_shape = f"({B * T}x{d})@({d}x{cfg.d_ff})"

    threads_text = benchkit.threads_text(threads)
    figure("lm_train_tokens_per_s", f"{tokens_per_s:.0f}",
           f"d_model={d} n_layers={L} n_heads={settings['n_heads']} block={T} batch={B}, {threads_text}, "
           f"median of {rounds} rounds of {steps} steps")
    figure("matmul_peak_gflops", f"{peak / 1e9:.1f}",
           f"best {dname} matmul: n x n with " + ", ".join(f"n={n}: {f / 1e9:.1f}" for n, f in peak_by_size.items())
           + f", the model's {ff_shape}: {ff_rate / 1e9:.1f} GFLOP/s; {threads_text}, same run")
    figure("lm_train_mfu", f"{mfu:.3f}",
           f"{achieved / 1e9:.1f} GFLOP/s of model FLOPs at 6N + 12LTd = {per_token / 1e6:.2f} MFLOP/token / "
           f"{peak / 1e9:.1f} GFLOP/s best matmul, median of per-round ratios, target >= {target}",
           verdict(mfu >= target))
    figure(f"lm_train_mfu_vs_matmul{big}", f"{mfu_big:.3f}",
           f"the same against the {big}x{big} matmul alone, {peak_by_size[big] / 1e9:.1f} GFLOP/s")
    res = {"device": str(device), "amp": args.amp, "compile": args.compile, "threads": threads,
           "settings": settings, "settings_source": source, "vocab_size": tokenizer.vocab_size,
           "n_linear": n_linear, "flops_per_token": per_token, "formula": "6*N + 12*L*T*d (PaLM, appendix B)",
           "attention_flops_fraction": 12 * L * T * d / per_token,
           "rounds": rounds, "steps_per_round": steps, "tokens_per_s_rounds": tok_s,
           "matmul_flops_rounds": [{str(n): f for n, f in p.items()} for p in peaks], "mfu_rounds": mfus,
           "tokens_per_s": tokens_per_s, "peak_flops": peak, "peak_by_size": {str(n): f for n, f in
                                                                              peak_by_size.items()},
           "peak_dtype": dname, "achieved_flops": achieved, "mfu": mfu, f"mfu_vs_matmul{big}": mfu_big,
           "mfu_vs_largest_matmul": mfu_big, "largest_matmul": big, "target_mfu": target,
           "ff_matmul_shape": ff_shape, "ff_matmul_flops_rounds": ffs, "ff_matmul_flops": ff_rate}
    if profile_s:
        tokens = B * T
        gemm_rate = 6 * n_linear * tokens / profile_s["gemm"]  # the weight matmuls' FLOPs / their time
        figure("lm_step_time_in_matmul", f"{profile_s['gemm'] / profile_s['total']:.3f}",
               f"one profiled step: matmuls {profile_s['gemm'] * 1e3:.0f} ms, fused attention "
               f"{profile_s['attention'] * 1e3:.0f} ms, everything else {profile_s['other'] * 1e3:.0f} ms")
        figure("lm_matmul_fraction_of_peak", f"{gemm_rate / peak:.3f}",
               f"6N FLOPs per token / time in matmuls = {gemm_rate / 1e9:.1f} GFLOP/s / {peak / 1e9:.1f} best")
        res.update(step_profile_s=profile_s, gemm_flops_in_training=gemm_rate,
                   gemm_fraction_of_peak=gemm_rate / peak)
    if tok_s_more:
        ratio = statistics.median(tok_s_more) / tokens_per_s
        figure("lm_train_all_cores_over_one_thread", f"{ratio:.2f}",
               f"{statistics.median(tok_s_more):.0f} tokens/s with {os.cpu_count()} threads / {tokens_per_s:.0f} "
               "with 1, interleaved on this shared machine")
        res.update(tokens_per_s_all_cores=statistics.median(tok_s_more), all_cores=os.cpu_count(),
                   all_cores_over_one_thread=ratio)
    if args.json:
        benchkit.write_json(args.json, res)
    return res


if __name__ == "__main__":
    main()
