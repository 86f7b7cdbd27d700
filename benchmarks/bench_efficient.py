"""Full attention against Linformer and sparse attention: forward time and peak memory against n.

One attention layer (B=4, D=128, H=4, not causal) of each kind from ``transformer_lib.efficient.make_attention``:

* ``full``: :class:`~transformer_lib.multihead.MultiHeadAttention` on the fused kernel (O(n²) time, O(n) memory);
* ``linformer``: keys and values projected along the sequence to k=256 rows (O(n·k));
* ``sparse_dense``: local window 64 + 2 global tokens + 3 random links, applied as a dense (n × n) boolean mask
  (exact and simple, but it still pays for n² scores);
* ``sparse_blocked``: the same pattern computed block by block (blocks of 64), O(n·(window + global + random)).

Time: forward passes, all kinds interleaved in this process, median of the repeats. Memory: the peak resident
memory of one forward pass above the resident memory before it, in a child process where glibc serves large
buffers by mmap (so freed memory leaves the process). The reference (weights-returning) path is measured by
``bench_reference_vs_fused.py``.

    python benchmarks/bench_efficient.py [--quick] [--json PATH]
"""
from __future__ import annotations

import argparse
import json

import torch

import benchkit
from benchkit import MiB, figure, verdict

KINDS = ("full", "linformer", "sparse_dense", "sparse_blocked")
B, D, H = 4, 128, 4
LINFORMER_K = 256
SPARSE = dict(window=64, n_global=2, n_random=3, block=64)
LENGTHS, QUICK_LENGTHS = (1024, 4096), (128, 512)
#: Kinds expected to be cheaper than full attention at the longest n (the dense-mask variant is not).
TARGETS = {"linformer": 1.0, "sparse_blocked": 1.0}


def make_layer(kind: str, n: int):
    from transformer_lib.efficient import make_attention

    torch.manual_seed(0)
    if kind == "full":
        layer = make_attention("full", D, H)
    elif kind == "linformer":
        layer = make_attention("linformer", D, H, seq_len=n, k=min(LINFORMER_K, n))
    else:
        layer = make_attention("sparse", D, H, impl=kind.split("_")[1], **SPARSE)
    return layer.eval()


def forward(layer, x):
    with torch.no_grad():
        return layer(x)


def memory_child(lengths) -> None:
    """Print one JSON line per (kind, n): the peak bytes of a forward pass (in a fresh process, see benchkit)."""
    for n in lengths:
        x = torch.randn(B, n, D)
        for kind in KINDS:
            layer = make_layer(kind, n)
            forward(layer, x)  # warm-up; also builds and caches the sparse pattern
            peak = benchkit.peak_rss_delta(lambda: forward(layer, x))
            print(json.dumps({"kind": kind, "n": n, "peak_bytes": peak}), flush=True)


def measure_memory(lengths, threads: int) -> dict:
    """``{kind: {n: peak bytes}}`` from a child process (empty if /proc cannot reset the peak)."""
    rows = benchkit.memory_child_rows(__file__, [",".join(map(str, lengths)), "--threads", threads])
    out: dict = {}
    for row in rows or []:
        out.setdefault(row["kind"], {})[row["n"]] = row["peak_bytes"]
    return out


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="short sequences, one repeat (smoke test)")
    benchkit.add_common_arguments(parser, memory_child=True)
    args = parser.parse_args(argv)
    benchkit.set_threads(args.threads)
    if args.memory_child:
        benchkit.use_mmap_for_large_buffers()
        memory_child([int(n) for n in args.memory_child.split(",")])
        return {}

    lengths = QUICK_LENGTHS if args.quick else LENGTHS
    repeats = 1 if args.quick else 3
    print(f"device: cpu ({torch.get_num_threads()} CPU threads); forward, B={B} D={D} H={H}, Linformer k="
          f"{LINFORMER_K}, sparse {SPARSE}; time: median of {repeats} interleaved")
    times: dict = {kind: {} for kind in KINDS}
    for n in lengths:
        x = torch.randn(B, n, D)
        layers = {kind: make_layer(kind, n) for kind in KINDS}
        fns = {kind: (lambda layer=layer: forward(layer, x)) for kind, layer in layers.items()}
        for kind, sec in benchkit.interleaved_medians(fns, repeats=repeats).items():
            times[kind][n] = sec
    memory = measure_memory(lengths, args.threads)

    print(f"\n{'n':>5} {'kind':>15} {'forward ms':>11} {'peak MiB':>9}")
    for n in lengths:
        for kind in KINDS:
            mem = memory.get(kind, {}).get(n)
            print(f"{n:>5} {kind:>15} {times[kind][n] * 1e3:>11.1f} "
                  f"{mem / MiB if mem is not None else float('nan'):>9.1f}")
    print()

    n = max(lengths)
    res = {"config": {"B": B, "D": D, "H": H, "linformer_k": LINFORMER_K, "sparse": SPARSE, "repeats": repeats},
           "lengths": list(lengths),
           "time_s": {k: {str(m): s for m, s in d.items()} for k, d in times.items()},
           "peak_bytes": {k: {str(m): b for m, b in d.items()} for k, d in memory.items()}, "ratios": {}}
    for kind in KINDS[1:]:
        ratio = times[kind][n] / times["full"][n]
        target = TARGETS.get(kind)
        detail = f"{kind} {times[kind][n] * 1e3:.1f} ms / full {times['full'][n] * 1e3:.1f} ms"
        figure(f"{kind}_over_full_time_n{n}", f"{ratio:.3f}",
               detail + (f", target <= {target:g}" if target else ""), verdict(ratio <= target) if target else None)
        res["ratios"][f"{kind}_time"] = ratio
        if memory:
            mem_ratio = memory[kind][n] / max(memory["full"][n], 1)
            figure(f"{kind}_over_full_memory_n{n}", f"{mem_ratio:.3f}",
                   f"{kind} {memory[kind][n] / MiB:.1f} MiB / full {memory['full'][n] / MiB:.1f} MiB")
            res["ratios"][f"{kind}_memory"] = mem_ratio
    if args.json:
        benchkit.write_json(args.json, res)
    return res


if __name__ == "__main__":
    main()
