"""The sizes of the capped run of each chapter's GPU branch (``BOOK_SMOKE``; tests/test_colab.py).

`make test-colab` runs every chapter with ``BOOK_SETTINGS=gpu BOOK_MAX_STEPS=3``: the GPU settings, every
``*steps`` setting capped at 3. Some other GPU sizes would still take minutes on a CPU (sequence lengths,
evaluation sets, seeds); for each chapter this table names the smaller values that replace them in that run
only. The harness passes a chapter's entry to its kernel as the JSON object ``BOOK_SMOKE``, which
``transformer_lib.notebook.pick_settings`` reads under the cap and ignores otherwise. The entries live here, with
the test that uses them, so that the chapters' settings cells show a reader only the settings a reader runs.

Keys are chapter stems; every key of an entry must be a setting of that chapter (``pick_settings`` raises
otherwise, naming the unknown key).
"""

SMOKE: dict[str, dict] = {
    "02_recurrence": dict(distances=(2, 4, 8), timing_lengths=(16, 64, 256), timing_repeats=1),
    # chapter 3 evaluates every run of its grid on the whole validation split, even after 3 steps: at the CPU width
    # the notebook took 59 s instead of 109 (two notebooks at a time, 2026-12-02)
    "03_seq2seq_attention": dict(d_hidden=64),
    "04_self_attention": dict(seeds=2, control_seeds=2),
    "06_minimal_architecture": dict(block_size=32),
    "08_training_tricks": dict(n_samples=20_000, n_queries=500, block_size=32, norm_width=64),
    "09_architectures": dict(seeds=2, valid_batches=1, batch_size=8, block_size=32),
    # chapter 10 decodes its whole test and long splits with models that, after 3 steps, never stop before max_len:
    # at the CPU widths the notebook took 75 s instead of 99 (as above)
    "10_translation": dict(beam_sentences=20, seeds=(0, 1), n_far=50, timing_repeats=1,
                           transformer=dict(d_model=64, n_heads=4, n_layers=2, d_ff=128, position="rotary",
                                            embed_scale=True),
                           rnn=dict(cell="lstm", attention="additive", d_embed=64, d_hidden=96),
                           birnn=dict(cell="lstm", attention="additive", d_embed=64, d_hidden=76, bidirectional=True)),
    "11_language_model": dict(d_model=64, n_layers=2, n_heads=4, block_size=128, batch_size=16, d_ff=256),
    "12_quadratic_cost": dict(sweep_lengths=(128, 256, 512), repeats=1, long_length=2_048, task_length=256,
                              cost_length=1_024),
    "13_modifications": dict(seeds=2, valid_batches=2, batch_size=8, block_size=32),
}
