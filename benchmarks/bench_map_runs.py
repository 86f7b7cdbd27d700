"""Independent training runs side by side: `tl.training.map_runs` against the same runs one after another.

The chapters train PyTorch on one thread (reproducible numbers), so a plain loop over seeds or model variants
keeps one core of a 2-core machine busy. `map_runs` forks one worker process per core and hands each a run. Here
`--runs` small language models (chapter-5-sized: d_model 64, 2 layers, 64 characters of context) train for
`--steps` steps each, once through a plain loop and once through `map_runs`, the two timed in turn (`--repeats`
rounds, medians compared). Figures: the speed-up (loop time over `map_runs` time), its efficiency (speed-up over
the cores the runs can use: min(cores, runs); target >= 0.75), and whether both gave bit-identical losses and
weights (a correctness check: FAIL otherwise).

    python benchmarks/bench_map_runs.py [--quick] [--runs N] [--steps N] [--repeats N]
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch

from transformer_lib import training
from transformer_lib.models import DecoderLM, DecoderLMConfig

from benchkit import figure, verdict

TARGET = 0.75
VOCAB, BLOCK, BATCH = 64, 64, 32


def train_one(seed: int, steps: int) -> tuple:
    """One small character-level LM trained from `seed` on a fixed random text; (losses, weights)."""
    text = torch.randint(0, VOCAB, (20_000,), generator=torch.Generator().manual_seed(1234))
    training.set_seed(seed)
    model = DecoderLM(DecoderLMConfig(vocab_size=VOCAB, d_model=64, n_heads=4, n_layers=2, d_ff=256, max_len=BLOCK))
    stream = iter(training_batches(text, seed))
    history = training.fit(model, lambda step: next(stream), training.lm_loss, steps=steps, lr=3e-3, seed=seed)
    return history.train_loss, model.state_dict()


def training_batches(text: torch.Tensor, seed: int):
    gen = torch.Generator().manual_seed(seed)
    while True:
        starts = torch.randint(0, len(text) - BLOCK - 1, (BATCH,), generator=gen)
        rows = torch.stack([text[s:s + BLOCK + 1] for s in starts.tolist()])
        yield rows[:, :-1], rows[:, 1:]


def same(a: list, b: list) -> bool:
    return all(la == lb and all(torch.equal(wa[k], wb[k]) for k in wa) for (la, wa), (lb, wb) in zip(a, b))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2 runs of 20 steps, one round (smoke test)")
    parser.add_argument("--runs", type=int, default=None, help="independent runs (default 4; quick 2)")
    parser.add_argument("--steps", type=int, default=None, help="training steps per run (default 300; quick 20)")
    parser.add_argument("--repeats", type=int, default=None, help="rounds of both, medians compared (default 2)")
    args = parser.parse_args(argv)
    n_runs = args.runs or (2 if args.quick else 4)
    steps = args.steps or (20 if args.quick else 300)
    repeats = args.repeats or (1 if args.quick else 2)
    torch.set_num_threads(1)                      # as in the chapters
    processes = training.map_runs_processes(n_runs)
    seeds = list(range(n_runs))

    times = {"loop": [], "map_runs": []}
    results = {}
    for _ in range(repeats):                      # in turn, so that a change of load hits both
        for name, run in (("loop", lambda: [train_one(s, steps) for s in seeds]),
                          ("map_runs", lambda: training.map_runs(lambda s: train_one(s, steps), seeds))):
            start = time.perf_counter()
            results[name] = run()
            times[name].append(time.perf_counter() - start)
    loop, parallel = statistics.median(times["loop"]), statistics.median(times["map_runs"])
    speedup = loop / parallel
    efficiency = speedup / processes
    identical = same(results["loop"], results["map_runs"])
    print(f"{n_runs} runs of {steps} steps (DecoderLM d_model 64, 2 layers, batch {BATCH} x {BLOCK}), one thread "
          f"each; map_runs used {processes} process(es); median of {repeats} round(s)")
    figure("map_runs_processes", str(processes), "worker processes: min(cores this process may use, runs)")
    figure("map_runs_speedup", f"{speedup:.2f}x", f"loop {loop:.1f} s / map_runs {parallel:.1f} s")
    figure("map_runs_efficiency", f"{efficiency:.2f}", f"speed-up / {processes} process(es), target >= {TARGET:g}",
           verdict(efficiency >= TARGET))
    figure("map_runs_identical_results", str(identical), "losses and weights, bit for bit",
           "PASS" if identical else "FAIL")
    if not identical:
        raise SystemExit("map_runs gave other results than the loop")
    return {"speedup": speedup, "efficiency": efficiency, "processes": processes}


if __name__ == "__main__":
    main()
