"""Tests for transformer_lib.training: device, seeds, schedules, fit, evaluate, losses, checkpoints, bad inputs."""
import json
import math
import random
import re
import sys
import time
from dataclasses import asdict, dataclass

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from transformer_lib import training as tr

D_IN, N_CLASSES, VOCAB = 6, 3, 11


@pytest.fixture(autouse=True)
def _cpu(monkeypatch):
    monkeypatch.setenv("TL_DEVICE", "cpu")


def make_classifier(seed=0):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(D_IN, 16), nn.ReLU(), nn.Linear(16, N_CLASSES))


def classification_batches(seed=0, batch_size=32):
    """A learnable task: the label is the argmax of a fixed linear map of x."""
    w = torch.randn(D_IN, N_CLASSES, generator=torch.Generator().manual_seed(123))

    def get_batch(step):
        g = torch.Generator().manual_seed(seed * 10_000 + step)
        x = torch.randn(batch_size, D_IN, generator=g)
        return x, (x @ w).argmax(-1)

    return get_batch


class TiedLM(nn.Module):
    """Embedding -> MLP -> output layer sharing the embedding matrix."""

    def __init__(self, vocab_size=VOCAB, d_model=8):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, d_model)
        self.mlp = nn.Sequential(nn.Linear(d_model, d_model), nn.GELU())
        self.head = nn.Linear(d_model, vocab_size, bias=False)
        self.head.weight = self.embed.weight

    def forward(self, ids):
        return self.head(self.mlp(self.embed(ids)))  # (B, T, V)


def lm_batches(batch_size=4, seq_len=5):
    def get_batch(step):
        g = torch.Generator().manual_seed(step)
        x = torch.randint(0, VOCAB, (batch_size, seq_len), generator=g)
        return x, (x + 1) % VOCAB

    return get_batch


@dataclass
class TinyConfig:
    vocab_size: int = VOCAB
    d_model: int = 8


# ------------------------------------------------------------------------------------------ device, seeds
def test_get_device_is_cpu_here_and_honours_tl_device(monkeypatch):
    assert tr.get_device() == torch.device("cpu")  # TL_DEVICE=cpu from the fixture
    monkeypatch.delenv("TL_DEVICE")
    if not torch.cuda.is_available() and not torch.backends.mps.is_available():
        assert tr.get_device() == torch.device("cpu")
    else:
        assert tr.get_device().type in ("cuda", "mps")
    monkeypatch.setenv("TL_DEVICE", "not-a-device")
    with pytest.raises(ValueError, match="TL_DEVICE"):
        tr.get_device()
    if not torch.cuda.is_available():
        monkeypatch.setenv("TL_DEVICE", "cuda")
        with pytest.raises(ValueError, match="CUDA is not available"):
            tr.get_device()


def test_set_seed_seeds_every_generator():
    def draw():
        return random.random(), float(np.random.rand()), torch.rand(3)

    g = tr.set_seed(7)
    a = draw()
    g2 = tr.set_seed(7)
    b = draw()
    assert a[:2] == b[:2]
    torch.testing.assert_close(a[2], b[2], rtol=0, atol=0)
    torch.testing.assert_close(torch.rand(4, generator=g), torch.rand(4, generator=g2), rtol=0, atol=0)
    torch.testing.assert_close(torch.rand(2, generator=tr.set_seed(7)),
                               torch.rand(2, generator=torch.Generator().manual_seed(7)), rtol=0, atol=0)
    with pytest.raises(ValueError, match="seed"):
        tr.set_seed(-1)


# ------------------------------------------------------------------------------------------- schedules
@pytest.mark.parametrize("kind, step, expected", [
    ("constant", 0, 0.25), ("constant", 3, 1.0), ("constant", 50, 1.0),            # warm-up 4 steps
    ("linear", 1, 0.5), ("linear", 4, 1.0), ("linear", 8, 0.5), ("linear", 12, 0.0), ("linear", 20, 0.0),
    ("cosine", 4, 1.0), ("cosine", 8, 0.5), ("cosine", 12, 0.0),
    ("inverse_sqrt", 3, 1.0), ("inverse_sqrt", 15, 0.5), ("inverse_sqrt", 63, 0.25),
])
def test_lr_schedule_values(kind, step, expected):
    assert tr.lr_schedule(step, warmup_steps=4, total_steps=12, kind=kind) == pytest.approx(expected)


def test_lr_schedule_without_warmup_and_monotone_decay():
    assert tr.lr_schedule(0, total_steps=10, kind="linear") == 1.0
    cos = [tr.lr_schedule(s, warmup_steps=3, total_steps=30, kind="cosine") for s in range(30)]
    assert cos[:3] == pytest.approx([1 / 3, 2 / 3, 1.0])
    assert all(a >= b for a, b in zip(cos[2:], cos[3:]))
    assert tr.lr_schedule(0, kind="inverse_sqrt") == 1.0  # no warm-up: 1/sqrt(step + 1)
    assert tr.lr_schedule(3, kind="inverse_sqrt") == pytest.approx(0.5)


def test_make_scheduler_matches_lr_schedule():
    p = nn.Parameter(torch.zeros(1))
    opt = torch.optim.SGD([p], lr=0.1)
    sched = tr.make_scheduler(opt, warmup_steps=3, total_steps=10, kind="cosine")
    seen = []
    for _ in range(10):
        seen.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    assert seen == pytest.approx([0.1 * tr.lr_schedule(s, warmup_steps=3, total_steps=10, kind="cosine")
                                  for s in range(10)])


@pytest.mark.parametrize("kwargs, match", [
    (dict(kind="step"), "kind"),
    (dict(kind="linear"), "total_steps"),
    (dict(kind="cosine", total_steps=5, warmup_steps=6), "warmup_steps"),
    (dict(warmup_steps=-1), "warmup_steps"),
])
def test_lr_schedule_bad_inputs(kwargs, match):
    with pytest.raises(ValueError, match=match):
        tr.lr_schedule(0, **kwargs)


# ------------------------------------------------------------------------------------------------- fit
def test_fit_lowers_the_loss_and_fills_history():
    model = make_classifier()
    h = tr.fit(model, classification_batches(), tr.classification_loss, steps=60, lr=1e-2, seed=0)
    assert h.steps == list(range(60))
    assert len(h.train_loss) == len(h.lr) == len(h.grad_norm) == 60
    assert np.mean(h.train_loss[-10:]) < 0.5 * np.mean(h.train_loss[:5])
    assert h.tokens == 60 * 32  # float inputs: examples are counted
    assert h.seconds > 0 and h.tokens_per_second == pytest.approx(h.tokens / h.seconds)
    assert model.training


def test_fit_lm_with_lm_loss_counts_tokens():
    torch.manual_seed(0)
    model = TiedLM()
    h = tr.fit(model, lm_batches(), tr.lm_loss, steps=40, lr=3e-2, warmup_steps=5, schedule="cosine")
    assert h.tokens == 40 * 4 * 5
    assert np.mean(h.train_loss[-5:]) < np.mean(h.train_loss[:5]) - 0.5
    assert h.lr == pytest.approx([3e-2 * tr.lr_schedule(s, warmup_steps=5, total_steps=40, kind="cosine")
                                  for s in range(40)])


def test_fit_is_deterministic_with_a_seed():
    def run():
        model = make_classifier(seed=1)
        model.insert(1, nn.Dropout(0.3))  # dropout draws from the seeded global RNG
        return tr.fit(model, classification_batches(), tr.classification_loss, steps=8, seed=5).train_loss

    a, b = run(), run()
    assert a == b



def test_fit_default_optimizer_on_cpu_updates_as_the_per_parameter_adamw_bit_for_bit():
    """On the CPU fit's default AdamW is the multi-tensor implementation (fewer calls per update): its updates must
    be those of the per-parameter loop (foreach=False) to the last bit, so that no stored chapter output moves.
    Weight decay on the matrices only, warm-up and clipping, as fit's default; a model with many small parameters."""
    def model_of():
        torch.manual_seed(3)
        return nn.Sequential(nn.Linear(D_IN, 16), nn.LayerNorm(16), nn.ReLU(), nn.Linear(16, 16), nn.LayerNorm(16),
                             nn.ReLU(), nn.Linear(16, N_CLASSES))

    options = dict(steps=30, warmup_steps=5, schedule="cosine", clip_grad=0.5, seed=0)
    ours = model_of()
    h_ours = tr.fit(ours, classification_batches(), tr.classification_loss, lr=2e-2, weight_decay=0.1, **options)
    assert h_ours.grad_norm[0] > 0.5                          # clipping was active at the start
    plain = model_of()
    params = list(plain.parameters())
    optimizer = torch.optim.AdamW([{"params": [p for p in params if p.dim() >= 2], "weight_decay": 0.1},
                                   {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}],
                                  lr=2e-2, foreach=False)
    h_plain = tr.fit(plain, classification_batches(), tr.classification_loss, optimizer=optimizer, **options)
    assert h_ours.train_loss == h_plain.train_loss
    assert all(torch.equal(p, q) for p, q in zip(ours.parameters(), plain.parameters()))

@pytest.mark.parametrize("schedule", ["constant", "inverse_sqrt"])
def test_fit_continued_with_start_step_equals_one_longer_run(schedule):
    """fit(a + b) and fit(a) then fit(b, start_step=a) with the same optimizer make the same updates, for a schedule
    that does not depend on the run's length; the History and the evaluations count steps from the run's start."""
    def optimizer_of(model):
        return torch.optim.AdamW(model.parameters(), lr=1e-2, betas=(0.9, 0.98))

    get_batch = classification_batches()
    whole = make_classifier(seed=2)
    h_whole = tr.fit(whole, get_batch, tr.classification_loss, steps=12, optimizer=optimizer_of(whole),
                     warmup_steps=4, schedule=schedule, seed=0)
    parts = make_classifier(seed=2)
    optimizer = optimizer_of(parts)
    h1 = tr.fit(parts, get_batch, tr.classification_loss, steps=5, optimizer=optimizer, warmup_steps=4,
                schedule=schedule, seed=0)
    h2 = tr.fit(parts, get_batch, tr.classification_loss, steps=7, optimizer=optimizer, warmup_steps=4,
                schedule=schedule, start_step=5, eval_fn=lambda m: {"one": 1.0}, eval_every=3)
    assert h1.steps + h2.steps == h_whole.steps == list(range(12))
    assert h1.train_loss + h2.train_loss == h_whole.train_loss
    assert h1.lr + h2.lr == h_whole.lr
    assert [n for n, _ in h2.eval] == [6, 9, 12]                    # every 3 updates of the run, and its last
    for p, q in zip(parts.parameters(), whole.parameters()):
        assert torch.equal(p, q)


def test_grad_norm_is_recorded_and_clipped():
    get_batch = classification_batches(batch_size=16)
    model = make_classifier()
    reference = make_classifier()
    F.cross_entropy(reference(get_batch(0)[0]), get_batch(0)[1]).backward()
    expected_norm = torch.cat([p.grad.flatten() for p in reference.parameters()]).norm().item()

    before = torch.cat([p.detach().flatten().clone() for p in model.parameters()])
    opt = torch.optim.SGD(model.parameters(), lr=1.0)
    clip = 1e-3
    h = tr.fit(model, get_batch, tr.classification_loss, steps=1, optimizer=opt, clip_grad=clip)
    after = torch.cat([p.detach().flatten() for p in model.parameters()])
    assert h.grad_norm[0] == pytest.approx(expected_norm, rel=1e-5)
    assert expected_norm > 10 * clip
    assert (after - before).norm().item() == pytest.approx(clip, rel=1e-3)  # SGD, lr 1: the step is the clipped grad

    h = tr.fit(make_classifier(), get_batch, tr.classification_loss, steps=1, clip_grad=None)
    assert h.grad_norm[0] == pytest.approx(expected_norm, rel=1e-5)


def test_weight_decay_applies_to_matrices_only():
    model = nn.Linear(4, 3)
    w0, b0 = model.weight.detach().clone(), model.bias.detach().clone()
    zero_loss = lambda m, batch: (m(batch[0]) * 0.0).sum()  # zero gradient: only the decay moves the weights
    tr.fit(model, lambda s: (torch.randn(2, 4),), zero_loss, steps=1, lr=0.1, weight_decay=0.5)
    torch.testing.assert_close(model.weight.detach(), w0 * (1 - 0.1 * 0.5))
    torch.testing.assert_close(model.bias.detach(), b0)


def test_eval_fn_is_called_every_eval_every_in_eval_mode():
    model = make_classifier()
    model.insert(1, nn.Dropout(0.1))
    calls = []

    def eval_fn(m):
        calls.append((m.training, torch.is_grad_enabled()))
        return {"acc": torch.tensor(0.5), "n": len(calls)}

    h = tr.fit(model, classification_batches(), tr.classification_loss, steps=10, eval_fn=eval_fn, eval_every=3)
    assert [s for s, _ in h.eval] == [3, 6, 9, 10]  # every 3 updates and after the last
    assert calls == [(False, False)] * 4
    assert model.training
    assert h.final_eval == {"acc": 0.5, "n": 4} and isinstance(h.final_eval["acc"], float)

    h = tr.fit(model, classification_batches(), tr.classification_loss, steps=4, eval_fn=eval_fn)
    assert [s for s, _ in h.eval] == [4]  # without eval_every: once, at the end
    assert tr.fit(model, classification_batches(), tr.classification_loss, steps=1).final_eval is None


def test_seconds_exclude_evaluation(monkeypatch):
    clock = [0.0]  # a fake clock: get_batch takes 1 s, each evaluation 100 s
    monkeypatch.setattr(time, "perf_counter", lambda: clock[0])   # the clock fit reads

    def get_batch(step):
        clock[0] += 1.0
        return classification_batches()(step)

    def slow_eval(m):
        clock[0] += 100.0
        return {}

    h = tr.fit(make_classifier(), get_batch, tr.classification_loss, steps=2, eval_fn=slow_eval, eval_every=1)
    assert len(h.eval) == 2
    assert h.seconds == 2.0 and h.tokens_per_second == 64 / 2.0


def test_log_every_and_progress_bar(capsys):
    tr.fit(make_classifier(), classification_batches(), tr.classification_loss, steps=4, log_every=2, progress=True)
    out, err = capsys.readouterr()
    assert "step      2/4  loss" in out and "step      4/4  loss" in out
    assert err  # tqdm draws on stderr
    tr.fit(make_classifier(), classification_batches(), tr.classification_loss, steps=4)
    assert capsys.readouterr() == ("", "")


def test_fit_bf16_autocast_runs_on_cpu():
    model = make_classifier()
    h = tr.fit(model, classification_batches(), tr.classification_loss, steps=30, lr=1e-2, amp="bf16")
    assert all(math.isfinite(x) for x in h.train_loss)
    assert np.mean(h.train_loss[-5:]) < np.mean(h.train_loss[:5])
    assert model[0].weight.dtype == torch.float32  # autocast keeps float32 master weights


@pytest.mark.slow
def test_fit_with_torch_compile_matches_eager():
    pytest.importorskip("torch._dynamo")
    try:
        compiled = tr.fit(make_classifier(), classification_batches(), tr.classification_loss, steps=3, compile=True)
    except Exception as err:  # no C++ compiler, unsupported platform...
        pytest.skip(f"torch.compile unavailable here: {type(err).__name__}: {err}")
    eager = tr.fit(make_classifier(), classification_batches(), tr.classification_loss, steps=3)
    assert compiled.train_loss == pytest.approx(eager.train_loss, rel=1e-4, abs=1e-5)


# ----------------------------------------------------------------------------------------------- history
def test_history_smoothed_and_dict_round_trip():
    h = tr.History(steps=[0, 1, 2, 3], train_loss=[4.0, 2.0, 3.0, 1.0], lr=[1.0] * 4, grad_norm=[1.0] * 4,
                   eval=[(4, {"acc": 0.5})], seconds=2.0, tokens=100)
    assert h.smoothed(2) == pytest.approx([4.0, 3.0, 2.5, 2.0])
    assert h.smoothed(1) == h.train_loss
    assert h.tokens_per_second == 50.0
    d = json.loads(json.dumps(h.to_dict()))
    assert d["tokens_per_second"] == 50.0 and d["eval"] == [[4, {"acc": 0.5}]]
    assert tr.History.from_dict(d) == h
    with pytest.raises(ValueError, match="window"):
        h.smoothed(0)


# ------------------------------------------------------------------------------------------------ losses
def test_lm_loss_ignores_minus_100_and_counts_tokens():
    torch.manual_seed(0)
    model = TiedLM()
    x = torch.randint(0, VOCAB, (2, 5))
    y = torch.randint(0, VOCAB, (2, 5))
    y[0, :3] = -100
    loss, n = tr.lm_loss(model, (x, y))
    logits = model(x)
    keep = y != -100
    expected = -torch.log_softmax(logits, -1).gather(-1, y.clamp(min=0)[..., None])[..., 0][keep].mean()
    torch.testing.assert_close(loss, expected)
    assert n == 7
    with pytest.raises(ValueError, match="logits"):
        tr.lm_loss(lambda ids: torch.zeros(2, 4, VOCAB), (x, y))
    with pytest.raises(ValueError, match="pair"):
        tr.lm_loss(model, (x,))


def test_seq2seq_loss_teacher_forcing_and_pad():
    seen = {}

    class Recorder(nn.Module):
        def __init__(self):
            super().__init__()
            self.out = nn.Embedding(VOCAB, VOCAB)

        def forward(self, src, tgt_in, src_mask=None):
            seen.update(tgt_in=tgt_in, src_mask=src_mask)
            return self.out(tgt_in)  # (B, T, V)

    model = Recorder()
    src = torch.tensor([[5, 6, 7], [8, 9, 0]])
    tgt = torch.tensor([[1, 4, 5, 2], [1, 6, 2, 0]])  # BOS y EOS PAD
    loss, n = tr.seq2seq_loss(model, (src, tgt))
    assert torch.equal(seen["tgt_in"], tgt[:, :-1])
    assert torch.equal(seen["src_mask"], src != 0)
    labels = tgt[:, 1:]
    expected = F.cross_entropy(model.out(tgt[:, :-1])[labels != 0], labels[labels != 0])
    torch.testing.assert_close(loss, expected)
    assert n == 5
    with pytest.raises(ValueError, match="tgt"):
        tr.seq2seq_loss(model, (src, tgt[:, :1]))


def test_classification_loss_matches_cross_entropy():
    model = make_classifier()
    x, y = classification_batches()(0)
    torch.testing.assert_close(tr.classification_loss(model, (x, y)), F.cross_entropy(model(x), y))
    with pytest.raises(ValueError, match="logits"):
        tr.classification_loss(model, (x, y[:5]))


def test_evaluate_is_token_weighted_and_restores_mode():
    torch.manual_seed(0)
    model = TiedLM()
    get_batch = lm_batches()
    b1 = get_batch(1)
    b2 = get_batch(2)
    b2[1][:, 1:] = -100  # the second batch counts 4 tokens, the first 20
    (l1, n1), (l2, n2) = tr.lm_loss(model, b1), tr.lm_loss(model, b2)
    assert (n1, n2) == (20, 4)
    expected = (l1.item() * 20 + l2.item() * 4) / 24
    assert tr.evaluate(model, [b1, b2], tr.lm_loss) == pytest.approx(expected, rel=1e-6)
    assert model.training
    model.eval()
    tr.evaluate(model, [b1], tr.lm_loss)
    assert not model.training
    unweighted = lambda m, b: tr.lm_loss(m, b)[0]
    assert tr.evaluate(model, [b1, b2], unweighted) == pytest.approx((l1.item() + l2.item()) / 2, rel=1e-6)
    with pytest.raises(ValueError, match="empty"):
        tr.evaluate(model, [], tr.lm_loss)


# ------------------------------------------------------------------------------------------- checkpoints
def test_checkpoint_round_trip_with_tied_weights_and_optimizer(tmp_path):
    torch.manual_seed(0)
    model = TiedLM()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    tr.fit(model, lm_batches(), tr.lm_loss, steps=5, optimizer=opt)
    path = tr.save_checkpoint(tmp_path / "ckpt" / "tiny.safetensors", model, opt, step=5, config=TinyConfig())
    assert path.exists() and (tmp_path / "ckpt" / "tiny.json").exists()

    torch.manual_seed(1)
    fresh = TiedLM(**asdict(TinyConfig()))
    fresh_opt = torch.optim.AdamW(fresh.parameters(), lr=1e-2)
    meta = tr.load_checkpoint(path, fresh, fresh_opt)
    assert meta == {"step": 5, "config": asdict(TinyConfig())}
    assert fresh.head.weight is fresh.embed.weight  # still tied after loading
    for k, v in model.state_dict().items():
        torch.testing.assert_close(fresh.state_dict()[k], v, rtol=0, atol=0)
    ids = torch.randint(0, VOCAB, (3, 4))
    torch.testing.assert_close(fresh(ids), model(ids), rtol=0, atol=0)

    # Resuming from the checkpoint continues exactly as the original run would.
    a = tr.fit(model, lm_batches(), tr.lm_loss, steps=2, optimizer=opt).train_loss
    b = tr.fit(fresh, lm_batches(), tr.lm_loss, steps=2, optimizer=fresh_opt).train_loss
    assert a == b


def test_checkpoint_errors(tmp_path):
    model = nn.Linear(2, 2)
    with pytest.raises(ValueError, match="safetensors"):
        tr.save_checkpoint(tmp_path / "model.pt", model)
    with pytest.raises(FileNotFoundError, match="no checkpoint"):
        tr.load_checkpoint(tmp_path / "missing.safetensors", model)
    with pytest.raises(TypeError, match="config"):
        tr.save_checkpoint(tmp_path / "m.safetensors", model, config=object())
    path = tr.save_checkpoint(tmp_path / "m.safetensors", model)
    assert tr.load_checkpoint(path, nn.Linear(2, 2)) == {"step": None, "config": None}
    with pytest.raises(FileNotFoundError, match="optimizer"):
        tr.load_checkpoint(path, model, torch.optim.SGD(model.parameters(), lr=0.1))


# --------------------------------------------------------------------------------------------- sharding
def test_shard_batch_splits_contiguously():
    x, y = torch.arange(12).view(6, 2), torch.arange(6)
    shards = [tr.shard_batch((x, y), rank=r, world_size=3) for r in range(3)]
    assert torch.equal(torch.cat([s[0] for s in shards]), x)
    assert torch.equal(shards[1][1], torch.tensor([2, 3]))
    assert torch.equal(tr.shard_batch((x,))[0], x)  # one process: all of it
    with pytest.raises(ValueError, match="batch size 6 .*divisible by the world size 4"):
        tr.shard_batch((x, y), rank=0, world_size=4)
    with pytest.raises(ValueError, match="rank"):
        tr.shard_batch((x, y), rank=3, world_size=3)


def test_process_helpers_without_torchrun(monkeypatch):
    for var in ("RANK", "WORLD_SIZE"):
        monkeypatch.delenv(var, raising=False)
    assert (tr.rank(), tr.world_size(), tr.is_main_process()) == (0, 1, True)
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    assert (tr.rank(), tr.world_size(), tr.is_main_process()) == (1, 2, False)


# -------------------------------------------------------------------------------------------- bad inputs
def nan_at_step_3(step):
    x, y = classification_batches()(step)
    return (x * float("nan") if step == 3 else x), y


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(steps=0), ValueError, "steps must be a positive int, got 0"),
    (dict(steps=-2), ValueError, "steps"),
    (dict(steps=2.5), TypeError, "steps must be an int"),
    (dict(lr=0.0), ValueError, "lr must be a positive finite number, got 0.0"),
    (dict(lr=-1e-3), ValueError, "lr"),
    (dict(schedule="exponential"), ValueError, "schedule must be one of .*got 'exponential'"),
    (dict(amp="fp16"), ValueError, r"amp must be one of \[None, 'bf16'\], got 'fp16'"),
    (dict(get_batch=[1, 2]), TypeError, "get_batch must be callable, got list"),
    (dict(loss_fn=None), TypeError, "loss_fn must be callable"),
    (dict(model="net"), TypeError, "model must be a torch.nn.Module"),
    (dict(loss_fn=lambda m, b: F.cross_entropy(m(b[0]), b[1], reduction="none")), ValueError,
     r"scalar \(0-dim\) loss, got shape \(32,\) at step 0"),
    (dict(get_batch=nan_at_step_3), FloatingPointError, "loss is nan at step 3"),
    (dict(get_batch=lambda s: torch.zeros(4, D_IN)), TypeError, r"get_batch\(0\) must return a tuple of tensors"),
    (dict(get_batch=lambda s: (torch.zeros(4, D_IN), [0, 1, 2, 3])), TypeError, "Tensor, list"),
    (dict(loss_fn=lambda m, b: tr.classification_loss(m, b).detach()), ValueError, "does not require grad"),
    (dict(loss_fn=lambda m, b: (1, 2, 3)), TypeError, "length 3"),
    (dict(eval_every=5), ValueError, "eval_every=5 needs an eval_fn"),
    (dict(eval_fn=lambda m: 0.5), TypeError, "eval_fn must return a dict"),
    (dict(clip_grad=0), ValueError, "clip_grad"),
    (dict(weight_decay=-0.1), ValueError, "weight_decay"),
    (dict(warmup_steps=10), ValueError, r"warmup_steps must be <= start_step \+ steps \(5\), got 10"),
    (dict(start_step=3), ValueError, "start_step=3 continues an earlier run and needs its optimizer, got optimizer=None"),
    (dict(start_step=-1), ValueError, "start_step must be"),
    (dict(device="gpu0"), ValueError, "device must name a torch device"),
])
def test_fit_bad_inputs(kwargs, error, match):
    args = dict(model=make_classifier(), get_batch=classification_batches(), loss_fn=tr.classification_loss, steps=5)
    args.update(kwargs)
    with pytest.raises(error, match=match):
        tr.fit(args.pop("model"), args.pop("get_batch"), args.pop("loss_fn"), **args)


# ---------------------------------------------------------------------------------------------- host reads
fit, lm_loss = tr.fit, tr.lm_loss
def _count_host_reads(monkeypatch):
    """Count reads of tensor values back to Python (each one a host-device synchronisation on a GPU).

    AdamW's own step counters live on the CPU (unless fused on CUDA, where they stay on the device), so reads
    made inside torch.optim are not counted."""
    import traceback

    counter = {"reads": 0}
    for name in ("item", "tolist", "__int__", "__float__", "__bool__", "__index__"):
        original = getattr(torch.Tensor, name)

        def counted(self, *args, _original=original, **kwargs):
            if not any("torch/optim" in frame.filename for frame in traceback.extract_stack(limit=12)):
                counter["reads"] += 1
            return _original(self, *args, **kwargs)

        monkeypatch.setattr(torch.Tensor, name, counted)
    return counter


def _lm_and_batches(n_steps=32, vocab=50, seed=0):
    from transformer_lib.models import DecoderLM, DecoderLMConfig

    torch.manual_seed(seed)
    model = DecoderLM(DecoderLMConfig(vocab_size=vocab, d_model=32, n_heads=4, n_layers=2, d_ff=64, max_len=16))
    g = torch.Generator().manual_seed(seed)
    data = [torch.randint(0, vocab, (4, 17), generator=g) for _ in range(n_steps)]
    return model, (lambda step: (data[step][:, :-1], data[step][:, 1:]))


def test_fit_reads_the_host_at_most_once_per_step_on_average(monkeypatch):
    """With sync_every=k, a DecoderLM's training steps read values back once per k steps (losses, gradient norms,
    token counts and the token-id checks in one transfer): at most one synchronisation per step on average."""
    model, get_batch = _lm_and_batches()
    counter = _count_host_reads(monkeypatch)
    history = fit(model, get_batch, lm_loss, steps=32, sync_every=8, device="cpu")
    assert len(history.train_loss) == 32 and len(history.grad_norm) == 32
    assert counter["reads"] <= 32 / 8, counter
    assert counter["reads"] >= 1                       # the counter does see the reads


def test_fit_every_step_reads_more(monkeypatch):
    """The counter is sensitive: reading every step (the CPU default) makes at least one read per step."""
    model, get_batch = _lm_and_batches(n_steps=8)
    counter = _count_host_reads(monkeypatch)
    fit(model, get_batch, lm_loss, steps=8, sync_every=1, device="cpu")
    assert counter["reads"] >= 8


def test_fit_deferred_reads_give_the_same_history():
    """Reading every 8 steps changes when values are read, not what is computed: identical losses and norms."""
    runs = []
    for sync_every in (1, 8):
        model, get_batch = _lm_and_batches(n_steps=20)
        h = fit(model, get_batch, lm_loss, steps=20, sync_every=sync_every, device="cpu", seed=0)
        runs.append((h.train_loss, h.grad_norm, h.tokens, [p.detach().clone() for p in model.parameters()]))
    assert runs[0][:3] == runs[1][:3]
    assert all(torch.equal(a, b) for a, b in zip(runs[0][3], runs[1][3]))


def test_fit_deferred_errors_name_the_step_and_the_id():
    model, get_batch = _lm_and_batches(n_steps=12)

    def bad_ids(step):
        x, y = get_batch(step)
        if step == 5:
            x = x.clone()
            x[0, 3] = 77
        return x, y

    with pytest.raises(ValueError, match=r"ids contains token id 77, outside the vocabulary \[0, 49\]"):
        fit(model, bad_ids, lm_loss, steps=12, sync_every=4, device="cpu")

    model, get_batch = _lm_and_batches(n_steps=12)

    def nan_loss(m, batch):
        loss, n = lm_loss(m, batch)
        return loss * float("nan") if fit_step["n"] == 6 else loss, n

    fit_step = {"n": -1}

    def counting_batch(step):
        fit_step["n"] = step
        return get_batch(step)

    with pytest.raises(FloatingPointError, match="training loss is nan at step 6"):
        fit(model, counting_batch, nan_loss, steps=12, sync_every=4, device="cpu")


def test_fit_sync_every_bad_input():
    model, get_batch = _lm_and_batches(n_steps=2)
    with pytest.raises(ValueError, match="sync_every"):
        fit(model, get_batch, lm_loss, steps=2, sync_every=0)


def test_fit_encoder_decoder_with_padding_reads_once_per_k_steps(monkeypatch):
    """The encoder-decoder path (padding masks, cross-attention, seq2seq_loss) reads nothing back between the
    deferred reads either."""
    from transformer_lib.models import EncoderDecoder, EncoderDecoderConfig

    torch.manual_seed(0)
    model = EncoderDecoder(EncoderDecoderConfig(src_vocab_size=40, tgt_vocab_size=40, d_model=32, n_heads=4,
                                                n_layers=2, d_ff=64, max_len=32))
    g = torch.Generator().manual_seed(0)

    def get_batch(step):
        src, tgt = torch.randint(3, 40, (4, 10), generator=g), torch.randint(3, 40, (4, 9), generator=g)
        src[0, 7:], tgt[1, 6:] = 0, 0                       # padding in both
        return src, tgt

    counter = _count_host_reads(monkeypatch)
    history = fit(model, get_batch, tr.seq2seq_loss, steps=16, sync_every=8, device="cpu")
    assert counter["reads"] <= 16 / 8, counter
    assert len(history.train_loss) == 16 and history.tokens > 0


# ------------------------------------------------------------------------------------------------ tune_lr
def _bowl(optimum, calls=None, diverge_above=None):
    """A training run whose final loss is a bowl in log10(lr) with its minimum at `optimum`."""
    def train(lr):
        if calls is not None:
            calls.append(lr)
        if diverge_above is not None and lr > diverge_above:
            raise FloatingPointError("non-finite loss")
        return {"loss": (math.log10(lr) - math.log10(optimum)) ** 2, "lr_seen": lr}
    return train


@pytest.mark.parametrize("lr_start, optimum, expected_k", [(1e-2, 1e-3, -2), (1e-4, 1e-3, 2), (1e-3, 1e-3, 0)])
def test_tune_lr_walks_to_the_optimum_of_a_bowl(lr_start, optimum, expected_k):
    calls = []
    best, runs, inside = tr.tune_lr(_bowl(optimum, calls), lr_start)
    assert best == pytest.approx(lr_start * 10 ** (expected_k / 2))
    assert inside                                       # one worse rate on each side of the chosen one
    assert list(runs) == sorted(runs) and len(calls) == len(set(calls)) == len(runs)   # each rate trained once
    assert all(run["lr_seen"] == lr for lr, run in runs.items())                       # the runs kept by rate
    worse = [lr for lr in runs if lr != best]
    assert min(worse) < best < max(worse)


def test_tune_lr_counts_a_diverged_run_as_worse_than_any_other():
    # the loss would keep falling up to 1e-1, but every rate above 3e-3 diverges
    best, runs, inside = tr.tune_lr(_bowl(1e-1, diverge_above=3e-3), 1e-4)
    assert best == pytest.approx(1e-4 * 10 ** 1.0)      # 1e-3, the last rate that trains
    assert inside and runs[max(runs)]["loss"] == math.inf


def test_tune_lr_stops_after_max_runs_and_says_the_best_is_at_an_end():
    best, runs, inside = tr.tune_lr(_bowl(1e-9), 1e-2, max_runs=4)
    assert len(runs) == 4 and best == min(runs)
    assert not inside


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(lr_start=0.0), ValueError, "lr_start must be a finite number > 0, got 0.0"),
    (dict(lr_start=float("nan")), ValueError, "lr_start must be a finite number > 0, got nan"),
    (dict(lr_start=True), ValueError, "lr_start must be a finite number > 0, got True"),
    (dict(factor=1.0), ValueError, "factor must be a finite number > 1, got 1.0"),
    (dict(max_runs=1), ValueError, "max_runs must be at least 2"),
    (dict(max_runs=2.5), TypeError, "max_runs must be an int, got float 2.5"),
])
def test_tune_lr_bad_arguments(kwargs, error, match):
    with pytest.raises(error, match=re.escape(match)):
        tr.tune_lr(_bowl(1e-3), **{"lr_start": 1e-3, **kwargs})


def test_tune_lr_bad_train():
    with pytest.raises(TypeError, match="train must be a function of the learning rate, got int 3"):
        tr.tune_lr(3, 1e-3)
    with pytest.raises(TypeError, match="train must return a dict with a 'loss', got float 0.5"):
        tr.tune_lr(lambda lr: 0.5, 1e-3)


# ---------------------------------------------------------------------------------------------- map_runs
def _seeded_run(seed):
    """A small training run that seeds itself: returns its model, its losses and one more random draw."""
    tr.set_seed(seed)
    model = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 3))
    x = torch.randn(256, 6)
    y = x[:, :3].argmax(1)
    history = tr.fit(model, lambda step: (x[step % 8 * 32:][:32], y[step % 8 * 32:][:32]), tr.classification_loss,
                     steps=40, lr=1e-2, seed=seed)
    return model, history.train_loss, (random.random(), np.random.rand(), torch.rand(2))


# map_runs forks its workers on Linux without a GPU; elsewhere it runs the calls in this process (tested below)
forking = pytest.mark.skipif(not sys.platform.startswith("linux") or torch.cuda.is_available(),
                             reason="map_runs forks worker processes only on Linux without a GPU")


@forking
def test_map_runs_equals_the_loop_bit_for_bit_and_leaves_its_random_state():
    torch.set_num_threads(1)
    parallel = tr.map_runs(_seeded_run, [3, 1, 4, 1], processes=2)
    after_parallel = (random.random(), np.random.rand(), torch.rand(3))
    serial = [_seeded_run(seed) for seed in [3, 1, 4, 1]]
    after_serial = (random.random(), np.random.rand(), torch.rand(3))
    for (m_p, loss_p, draw_p), (m_s, loss_s, draw_s) in zip(parallel, serial):
        assert loss_p == loss_s
        assert draw_p[:2] == draw_s[:2] and torch.equal(draw_p[2], draw_s[2])
        for p, q in zip(m_p.state_dict().values(), m_s.state_dict().values()):
            assert torch.equal(p, q)
    assert after_parallel[:2] == after_serial[:2] and torch.equal(after_parallel[2], after_serial[2])


_X = torch.randn(256, 6, generator=torch.Generator().manual_seed(0))
_Y = _X[:, :3].argmax(1)


def _new_run(seed):
    """A model and its AdamW optimizer (foreach, as chapters 3 and 10 build it; the per-parameter loop's arithmetic,
    test_fit_default_optimizer_on_cpu_updates_as_the_per_parameter_adamw_bit_for_bit), from `seed`."""
    tr.set_seed(seed)
    model = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 3))
    return {"model": model, "optimizer": torch.optim.AdamW(model.parameters(), lr=1e-2, foreach=True), "done": 0}


def _train_on(job):
    """job = (run, budget): train the run on from the steps it has done to `budget` (warm-up and schedule continue
    where it stopped); returns the run, its model and optimizer together."""
    run, budget = job
    tr.fit(run["model"], lambda step: (_X[step % 8 * 32:][:32], _Y[step % 8 * 32:][:32]), tr.classification_loss,
           steps=budget - run["done"], start_step=run["done"], optimizer=run["optimizer"], warmup_steps=10,
           schedule="inverse_sqrt")
    run["done"] = budget
    return run


@forking
def test_map_runs_hands_back_runs_that_train_on_as_if_never_stopped():
    """Chapter 10 trains a run to one budget in a worker and on to the next in another: the model and its optimizer
    come back in one pickle, so the optimizer still updates that model's parameters, with its moments, and the run
    ends bit for bit where an unbroken run in this process ends."""
    torch.set_num_threads(1)
    seeds = [0, 1]
    runs = tr.map_runs(_train_on, [(_new_run(seed), 15) for seed in seeds], processes=2)
    for run in runs:
        params = list(run["model"].parameters())
        assert all(p is q for p, q in zip(params, run["optimizer"].param_groups[0]["params"]))
        assert len(run["optimizer"].state) == len(params)                       # the moments came back too
        assert all(id(p) in {id(q) for q in params} for p in run["optimizer"].state)
    runs = tr.map_runs(_train_on, [(run, 40) for run in runs], processes=2)
    for seed, run in zip(seeds, runs):
        unbroken = _train_on((_new_run(seed), 40))
        for p, q in zip(run["model"].state_dict().values(), unbroken["model"].state_dict().values()):
            assert torch.equal(p, q)


@forking
def test_map_runs_uses_other_processes_and_takes_closures():
    import os

    offset = 10
    pids = tr.map_runs(lambda i: (os.getpid(), i + offset), range(6), processes=2)
    assert [i for _, i in pids] == list(range(10, 16))           # in the order of the items
    assert os.getpid() not in {pid for pid, _ in pids}
    assert tr.map_runs(lambda i: (os.getpid(), i), [0], processes=2)[0][0] == os.getpid()   # one item: here


@forking
def test_map_runs_prints_what_the_calls_print_in_order(capsys):
    def shout(i):
        print(f"run {i}")
        print(f"warning {i}", file=sys.stderr)
        return i

    assert tr.map_runs(shout, range(4), processes=2) == [0, 1, 2, 3]
    captured = capsys.readouterr()
    assert captured.out == "".join(f"run {i}\n" for i in range(4))
    assert captured.err == "".join(f"warning {i}\n" for i in range(4))


class _Unpicklable(Exception):
    def __reduce__(self):
        raise TypeError("cannot pickle")


@forking
def test_map_runs_raises_a_workers_exception_with_its_traceback():
    def fail_on_two(i):
        if i == 2:
            raise KeyError("two")
        return i

    with pytest.raises(KeyError, match="two") as info:
        tr.map_runs(fail_on_two, range(4), processes=2)
    if hasattr(info.value, "__notes__"):
        assert "fail_on_two" in info.value.__notes__[0]

    def unpicklable(i):
        raise _Unpicklable("odd")

    with pytest.raises(RuntimeError, match="_Unpicklable: odd"):
        tr.map_runs(unpicklable, range(2), processes=2)


def test_map_runs_in_process_when_asked_for_one(monkeypatch):
    seen = []
    assert tr.map_runs(lambda i: seen.append(i) or i * i, range(3), processes=1) == [0, 1, 4]
    assert seen == [0, 1, 2]                                     # side effects happen here: no worker
    monkeypatch.setenv("BOOK_PROCESSES", "1")
    seen.clear()
    tr.map_runs(lambda i: seen.append(i), range(3))
    assert seen == [0, 1, 2]
    assert tr.map_runs(abs, []) == []


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(fn=3, items=[1]), TypeError, r"fn must be callable, got int 3"),
    (dict(fn=abs, items=5), TypeError, r"items must be an iterable .* got int 5"),
    (dict(fn=abs, items="abc"), TypeError, r"items must be an iterable .* got str 'abc'"),
    (dict(fn=abs, items=[1], processes=0), ValueError, r"processes must be a positive int, got 0"),
    (dict(fn=abs, items=[1], processes=1.5), TypeError, r"processes must be an int, got float 1.5"),
])
def test_map_runs_bad_arguments(kwargs, error, match):
    fn, items = kwargs.pop("fn"), kwargs.pop("items")
    with pytest.raises(error, match=match):
        tr.map_runs(fn, items, **kwargs)


def test_map_runs_bad_environment(monkeypatch):
    monkeypatch.setenv("BOOK_PROCESSES", "two")
    with pytest.raises(ValueError, match=r"BOOK_PROCESSES must be a positive integer, got 'two'"):
        tr.map_runs(abs, [1, 2])


def test_map_runs_processes_counts_cores_runs_and_the_environment(monkeypatch):
    monkeypatch.delenv("BOOK_PROCESSES", raising=False)
    forks = sys.platform.startswith("linux") and not torch.cuda.is_available()
    cores = len(__import__("os").sched_getaffinity(0)) if forks else 1
    assert tr.map_runs_processes(0) == 1
    assert tr.map_runs_processes(1, processes=8) == 1
    assert tr.map_runs_processes(100) == (cores if forks else 1)
    assert tr.map_runs_processes(5, processes=3) == (3 if forks else 1)
    monkeypatch.setenv("BOOK_PROCESSES", "2")
    assert tr.map_runs_processes(10) == (2 if forks else 1)
    with pytest.raises(ValueError, match=r"n_items must be a non-negative int, got -1"):
        tr.map_runs_processes(-1)
