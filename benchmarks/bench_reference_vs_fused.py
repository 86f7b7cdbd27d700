"""Reference (weights-returning) attention against the fused kernel: time and peak memory against T.

``transformer_lib.attention.scaled_dot_product_attention`` has two paths that compute the same function. With
``return_weights=True`` it runs :func:`~transformer_lib.attention.attention_reference`, which materialises the
(B, H, T, T) score and weight matrices: O(T²) memory. Otherwise it calls PyTorch's fused kernel
(``torch.nn.functional.scaled_dot_product_attention``; flash attention on this CPU for causal inputs), which works
in tiles and never holds the T × T matrix: O(T) memory beyond its inputs. Both are O(T²) in time.

Measured here, forward only (inference, or the weights of a heatmap), causal, B=1, H=8, d_head=32:

* time per call, both paths interleaved in this process (median of the repeats);
* peak memory per call, in a child process: the rise of the peak resident memory (VmHWM) above the resident
  memory before the call, with glibc serving large buffers by mmap so that freed memory leaves the process
  (on CUDA: ``torch.cuda.max_memory_allocated``). The inputs q, k, v exist before the call and are not counted;
* where the reference path stops fitting a memory budget (2 GiB by default, and the machine's RAM), from the
  measured peaks (a power law through the two points around the budget), and how far the fused path goes;
* that the library takes the reference path only when weights are requested: a spy counts the calls of
  ``attention_reference`` and of PyTorch's fused kernel through every model, layer and decoding routine.

    python benchmarks/bench_reference_vs_fused.py [--quick] [--device cpu|cuda] [--budget-gib 2] [--json PATH]
"""
from __future__ import annotations

import argparse
import json
import math
from contextlib import contextmanager

import torch

import benchkit
from benchkit import GiB, MiB, figure, verdict

B, H, D_HEAD = 1, 8, 32
LENGTHS = (256, 512, 1024, 2048, 4096)
FUSED_EXTRA = (8192,)  # the fused path only: the reference path needs several GiB there
QUICK_LENGTHS = (64, 128, 256)


def make_qkv(t: int, device, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(B, H, t, D_HEAD, generator=g).to(device) for _ in range(3))  # (B, H, T, Dh) each
    return q, k, v


def run_path(path: str, q, k, v):
    """One forward call of the library's attention on the given path."""
    from transformer_lib.attention import scaled_dot_product_attention

    with torch.no_grad():
        if path == "reference":
            return scaled_dot_product_attention(q, k, v, causal=True, return_weights=True)
        return scaled_dot_product_attention(q, k, v, causal=True)


def score_matrix_bytes(t: int, itemsize: int = 4) -> int:
    """Bytes of one (B, H, T, T) float32 score matrix."""
    return B * H * t * t * itemsize


# ------------------------------------------------------------------------------------------- memory
def memory_child(lengths_by_path: dict, device: str) -> dict:
    """Peak bytes per (path, T), measured in this process (a fresh one, see benchkit; or on CUDA)."""
    out = {}
    for path, lengths in lengths_by_path.items():
        out[path] = {}
        for t in lengths:
            q, k, v = make_qkv(t, device)
            run_path(path, *make_qkv(min(t, 64), device))  # warm-up: kernels, thread pool
            if torch.device(device).type == "cuda":
                torch.cuda.synchronize()
                torch.cuda.reset_peak_memory_stats()
                base = torch.cuda.memory_allocated()
                run_path(path, q, k, v)  # the peak counter keeps the high-water mark after the result is freed
                torch.cuda.synchronize()
                peak = torch.cuda.max_memory_allocated() - base
            else:
                peak = benchkit.peak_rss_delta(lambda: run_path(path, q, k, v))
            out[path][t] = peak
            print(json.dumps({"path": path, "T": t, "peak_bytes": peak}), flush=True)
    return out


def measure_memory(lengths_by_path: dict, device: str, threads: int = 1) -> dict:
    """Run :func:`memory_child` in a fresh process (CPU) or here (CUDA); ``{path: {T: bytes}}``."""
    if torch.device(device).type == "cuda":
        return memory_child(lengths_by_path, device)
    spec = json.dumps({p: list(ts) for p, ts in lengths_by_path.items()})
    rows = benchkit.memory_child_rows(__file__, [spec, "--device", device, "--threads", threads])
    out: dict = {}
    for row in rows or []:
        out.setdefault(row["path"], {})[row["T"]] = row["peak_bytes"]
    return out


def crossing(points: dict, budget: float, law: str):
    """The T at which a peak-memory curve reaches ``budget``, and whether that T was interpolated.

    ``law='power'``: peak = c·T^p through the two measured points around the budget (or the last two, to
    extrapolate). ``law='linear'``: least squares a + b·T over the points, extrapolated (None if b <= 0).
    """
    ts = sorted(t for t in points if points[t] > 0)
    if len(ts) < 2:
        return None, False
    if law == "linear":
        n = len(ts)
        mt, mp = sum(ts) / n, sum(points[t] for t in ts) / n
        slope = sum((t - mt) * (points[t] - mp) for t in ts) / sum((t - mt) ** 2 for t in ts)
        if slope <= 0:
            return None, False
        return (budget - (mp - slope * mt)) / slope, False
    for lo, hi in zip(ts, ts[1:]):
        if points[hi] >= budget:
            break
    else:
        lo, hi = ts[-2], ts[-1]
    p = math.log(points[hi] / points[lo]) / math.log(hi / lo)
    t_star = hi * (budget / points[hi]) ** (1.0 / p)
    return t_star, points[hi] >= budget


def round2(x: float) -> int:
    """Round to two significant digits (an extrapolated length is no more precise)."""
    if x <= 0:
        return 0
    digits = int(math.floor(math.log10(x))) - 1
    return int(round(x, -digits))


# ------------------------------------------------------------------------------------------- spy
@contextmanager
def count_attention_calls():
    """Count calls of the library's reference path and of PyTorch's fused kernel while the block runs."""
    import torch.nn.functional as F

    import transformer_lib.attention as attention

    counts = {"reference": 0, "fused": 0}
    # attention._reference is the reference path behind attention_reference and return_weights=True alike.
    real_ref, real_fused = attention._reference, F.scaled_dot_product_attention

    def ref_spy(*args, **kwargs):
        counts["reference"] += 1
        return real_ref(*args, **kwargs)

    def fused_spy(*args, **kwargs):
        counts["fused"] += 1
        return real_fused(*args, **kwargs)

    attention._reference, F.scaled_dot_product_attention = ref_spy, fused_spy
    try:
        yield counts
    finally:
        attention._reference, F.scaled_dot_product_attention = real_ref, real_fused


def reference_path_scenarios() -> dict:
    """Run the library's layers, models and decoders; ``{scenario: (reference calls, fused calls)}``.

    Weights are requested only in the scenarios whose name ends in ``+weights``.
    """
    import transformer_lib as tl
    from transformer_lib.efficient import make_attention
    from transformer_lib.generation import beam_search, generate, greedy_translate
    from transformer_lib.models import (DecoderLM, DecoderLMConfig, Encoder, EncoderConfig, EncoderDecoder,
                                        EncoderDecoderConfig)
    from transformer_lib.multihead import MultiHeadAttention

    torch.manual_seed(0)
    V, D, nh = 20, 32, 4
    x = torch.randn(2, 12, D)
    ids = torch.randint(4, V, (2, 12))
    src = torch.randint(4, V, (2, 9))
    src[1, 6:] = 0  # padding
    small = dict(d_model=D, n_heads=nh, n_layers=2, d_ff=64, max_len=64)

    def lm(position):
        return DecoderLM(DecoderLMConfig(vocab_size=V, position=position, **small))

    def train_step(model):
        logits = model(ids)
        logits.sum().backward()

    mha = MultiHeadAttention(D, nh)
    seq2seq = EncoderDecoder(EncoderDecoderConfig(src_vocab_size=V, tgt_vocab_size=V, **small)).eval()
    scenarios = {
        "multihead causal": lambda: mha(x, causal=True),
        "multihead padding mask": lambda: mha(x, mask=tl.attention.padding_mask(torch.tensor([12, 7]))),
        "multihead cross-attention": lambda: mha(x, context=torch.randn(2, 5, D)),
        "encoder": lambda: Encoder(EncoderConfig(vocab_size=V, **small))(src),
        **{f"decoder LM train step ({p})": (lambda p=p: train_step(lm(p)))
           for p in ("sinusoidal", "learned", "alibi", "relative", "rotary")},
        "encoder-decoder forward": lambda: seq2seq(src, ids),
        "generate with KV cache": lambda: generate(lm("rotary"), ids[:, :4], 6, greedy=True),
        "generate without cache": lambda: generate(lm("alibi"), ids[:, :4], 6, greedy=True, use_cache=False),
        "greedy translation": lambda: greedy_translate(seq2seq, src, max_len=6),
        "beam search": lambda: beam_search(seq2seq, src[:1], beam_size=3, max_len=6),
        "linformer": lambda: make_attention("linformer", D, nh, seq_len=12, k=4)(x),
        "sparse (blocked)": lambda: make_attention("sparse", D, nh, window=4, n_global=1, n_random=1, block=4,
                                                   impl="blocked")(x),
        "sparse (dense mask)": lambda: make_attention("sparse", D, nh, window=4, n_global=1, n_random=1,
                                                      impl="dense")(x),
        "multihead +weights": lambda: mha(x, causal=True, return_weights=True),
        "decoder LM +weights": lambda: lm("sinusoidal")(ids, return_weights=True),
    }
    results = {}
    for name, run in scenarios.items():
        with count_attention_calls() as counts:
            run()
        results[name] = (counts["reference"], counts["fused"])
    return results


def reference_only_with_weights(results: dict) -> bool:
    """Every scenario without weights used the fused kernel only; every one with weights used the reference."""
    for name, (ref, fused) in results.items():
        if name.endswith("+weights"):
            if ref == 0:
                return False
        elif ref != 0 or fused == 0:
            return False
    return True


# ------------------------------------------------------------------------------------------- main
def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="short lengths, one repeat (smoke test)")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--budget-gib", type=float, default=2.0, help="memory budget (GiB)")
    benchkit.add_common_arguments(parser, memory_child=True)
    args = parser.parse_args(argv)
    benchkit.set_threads(args.threads)
    if args.memory_child:
        benchkit.use_mmap_for_large_buffers()
        memory_child({p: [int(t) for t in ts] for p, ts in json.loads(args.memory_child).items()}, args.device)
        return {}

    device = torch.device(args.device)
    lengths = QUICK_LENGTHS if args.quick else LENGTHS
    fused_lengths = lengths if args.quick else lengths + FUSED_EXTRA
    repeats = 1 if args.quick else 3
    budget = args.budget_gib * GiB
    ram = benchkit.machine().get("ram_bytes") if device.type == "cpu" else torch.cuda.get_device_properties(
        device).total_memory
    print(f"device: {device} ({torch.get_num_threads()} CPU threads); causal forward, B={B} H={H} "
          f"d_head={D_HEAD}; time: median of {repeats} interleaved; memory: peak above the inputs")

    # ---- time (interleaved; the reference path only where it fits comfortably)
    times = {"reference": {}, "fused": {}}
    for t in fused_lengths:
        q, k, v = make_qkv(t, device)
        fns = {"fused": lambda: run_path("fused", q, k, v)}
        if t in lengths:
            fns["reference"] = lambda: run_path("reference", q, k, v)
        for path, sec in benchkit.interleaved_medians(fns, repeats=repeats, device=device).items():
            times[path][t] = sec
        print(f"  T={t:>5}: fused {times['fused'][t] * 1e3:9.1f} ms"
              + (f", reference {times['reference'][t] * 1e3:9.1f} ms" if t in times["reference"] else ""),
              flush=True)

    # ---- memory (a child process, so that nothing else of this process is resident)
    memory = measure_memory({"reference": list(lengths), "fused": list(fused_lengths)}, args.device, args.threads)
    for t in fused_lengths:
        ref = memory.get("reference", {}).get(t)
        fused = memory.get("fused", {}).get(t)
        print(f"  T={t:>5}: peak fused {fused / MiB if fused is not None else float('nan'):9.1f} MiB"
              + (f", reference {ref / MiB:9.1f} MiB ({ref / score_matrix_bytes(t):.1f} score matrices)"
                 if ref is not None else ""), flush=True)

    # ---- figures
    t_big = max(lengths)
    res = {"config": {"B": B, "H": H, "d_head": D_HEAD, "causal": True, "pass": "forward", "device": str(device),
                      "repeats": repeats, "budget_bytes": budget, "ram_bytes": ram},
           "lengths": list(lengths), "fused_lengths": list(fused_lengths),
           "time_s": {p: {str(t): s for t, s in d.items()} for p, d in times.items()},
           "peak_bytes": {p: {str(t): b for t, b in d.items()} for p, d in memory.items()}}
    time_ratio = times["fused"][t_big] / times["reference"][t_big]
    figure(f"fused_over_reference_time_T{t_big}", f"{time_ratio:.3f}",
           f"fused {times['fused'][t_big] * 1e3:.1f} ms / reference {times['reference'][t_big] * 1e3:.1f} ms, "
           "target <= 1", verdict(time_ratio <= 1.0))
    res["fused_over_reference_time"] = time_ratio
    if memory:
        ref_mem, fused_mem = memory["reference"], memory["fused"]
        mem_ratio = fused_mem[t_big] / max(ref_mem[t_big], 1)
        figure(f"fused_over_reference_memory_T{t_big}", f"{mem_ratio:.4f}",
               f"fused {fused_mem[t_big] / MiB:.1f} MiB / reference {ref_mem[t_big] / MiB:.1f} MiB, target <= 0.1",
               verdict(mem_ratio <= 0.1))
        copies = ref_mem[t_big] / score_matrix_bytes(t_big)
        figure(f"reference_peak_score_matrices_T{t_big}", f"{copies:.1f}",
               f"reference peak / one {B}x{H}x{t_big}x{t_big} float32 score matrix of "
               f"{score_matrix_bytes(t_big) / MiB:.0f} MiB")
        t_budget, interpolated = crossing(ref_mem, budget, "power")
        how = "interpolated between measured lengths" if interpolated else "extrapolated from the largest lengths"
        figure("reference_max_T_in_budget", f"{round2(t_budget):,}",
               f"peak memory reaches the {args.budget_gib:g} GiB budget; {how}")
        t_ram, _ = crossing(ref_mem, ram, "power")
        figure("reference_max_T_in_ram", f"{round2(t_ram):,}",
               f"peak memory reaches the machine's {ram / GiB:.1f} GiB; extrapolated")
        t_fused_max = max(fused_mem)
        figure("fused_longest_T_measured", f"{t_fused_max}",
               f"peak {fused_mem[t_fused_max] / MiB:.1f} MiB, target <= {args.budget_gib:g} GiB",
               verdict(fused_mem[t_fused_max] <= budget))
        t_fused, _ = crossing({t: b for t, b in fused_mem.items() if t >= 1024} or fused_mem, budget, "linear")
        fused_time_at_budget = None
        if t_fused is not None:
            t_last = max(times["fused"])
            fused_time_at_budget = times["fused"][t_last] * (t_fused / t_last) ** 2  # time grows as T²
            figure("fused_max_T_in_budget", f"{round2(t_fused):,}",
                   f"linear growth of the fused peak, extrapolated to {args.budget_gib:g} GiB; one forward pass "
                   f"there would take about {fused_time_at_budget / 3600:.1f} h at T² time growth")
        res.update(score_matrices=copies, reference_max_T_in_budget=round2(t_budget),
                   reference_budget_interpolated=interpolated, reference_max_T_in_ram=round2(t_ram),
                   fused_longest_T_measured=t_fused_max,
                   fused_max_T_in_budget=round2(t_fused) if t_fused is not None else None,
                   fused_time_at_budget_s=fused_time_at_budget)

    scenarios = reference_path_scenarios()
    ok = reference_only_with_weights(scenarios)
    n_plain = sum(not s.endswith("+weights") for s in scenarios)
    figure("library_reference_only_with_weights", str(ok),
           f"{n_plain} runs without weights: reference 0 calls, fused "
           f"{sum(f for s, (_, f) in scenarios.items() if not s.endswith('+weights'))} calls; "
           f"{len(scenarios) - n_plain} runs with weights: reference "
           f"{sum(r for s, (r, _) in scenarios.items() if s.endswith('+weights'))} calls",
           "PASS" if ok else "FAIL")
    res["scenarios"] = {s: {"reference_calls": r, "fused_calls": f} for s, (r, f) in scenarios.items()}
    res["reference_path_only_with_weights"] = ok
    if args.json:
        benchkit.write_json(args.json, res)
    return res


if __name__ == "__main__":
    main()
