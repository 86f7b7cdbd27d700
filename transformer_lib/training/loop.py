"""The training loop: device, seeds, learning-rate schedules, :func:`fit` and its :class:`History`, and
:func:`evaluate`. Conventions and data parallelism: see the package, :mod:`~transformer_lib.training`.
"""
from __future__ import annotations

import dataclasses
import math
import os
import random
import sys
import time
from contextlib import nullcontext
from dataclasses import dataclass, field
from functools import partial
from typing import Callable, Iterable, Optional, Sequence, Union

import numpy as np
import torch
import torch.distributed as dist
from torch import nn

from ..checks import check_choice, check_positive_int, deferred_checks, raise_deferred
from .distributed import _init_distributed, _launched_distributed, shard_batch

SCHEDULES = ("constant", "linear", "cosine", "inverse_sqrt")
AMP_MODES = (None, "bf16")

Batch = Sequence[torch.Tensor]


# --------------------------------------------------------------------------------------------- device, seeds
def get_device() -> torch.device:
    """The device chapters train on: CUDA, then Apple's MPS, then the CPU.

    The environment variable ``TL_DEVICE`` (e.g. ``cpu``, ``cuda:1``) overrides the choice; tests use it.

    Returns:
        A ``torch.device``.
    """
    requested = os.environ.get("TL_DEVICE")
    if requested:
        try:
            device = torch.device(requested)
        except RuntimeError as err:
            raise ValueError(f"TL_DEVICE must name a torch device such as 'cpu' or 'cuda:0', got {requested!r}") from err
        if device.type == "cuda" and not torch.cuda.is_available():
            raise ValueError(f"TL_DEVICE={requested!r} but CUDA is not available; expected 'cpu' or unset")
        if device.type == "mps" and not (hasattr(torch.backends, "mps") and torch.backends.mps.is_available()):
            raise ValueError(f"TL_DEVICE={requested!r} but MPS is not available; expected 'cpu' or unset")
        return device
    if torch.cuda.is_available():
        return torch.device("cuda")
    if hasattr(torch.backends, "mps") and torch.backends.mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def set_seed(seed: int) -> torch.Generator:
    """Seed Python's ``random``, NumPy and PyTorch (CPU and every GPU).

    Args:
        seed: a non-negative int.

    Returns:
        A CPU ``torch.Generator`` seeded with ``seed``, handy for sampling data independently of the model's RNG.
    """
    check_positive_int("seed", seed, allow_zero=True)
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)  # also seeds every CUDA device
    return torch.Generator().manual_seed(seed)



# ----------------------------------------------------------------------------------------- schedules
def lr_schedule(step: int, *, warmup_steps: int = 0, total_steps: Optional[int] = None, kind: str = "constant") -> float:
    """Learning-rate multiplier at optimizer step ``step`` (0-based): a linear warm-up, then ``kind``.

    Warm-up rises as ``(step + 1) / warmup_steps`` so the first update already moves the weights. After it:
    ``'constant'`` stays at 1; ``'linear'`` and ``'cosine'`` decay from 1 towards 0 at ``total_steps``;
    ``'inverse_sqrt'`` is the schedule of Vaswani et al. (2017), ``sqrt(warmup_steps / (step + 1))``, normalised to
    peak at 1 (their ``d_model ** -0.5`` factor belongs in the base learning rate).

    Args:
        step: the optimizer step, >= 0.
        warmup_steps: steps of linear warm-up, >= 0.
        total_steps: the last step of the decay; required for ``'linear'`` and ``'cosine'``.
        kind: one of ``SCHEDULES``.

    Returns:
        A float in [0, 1].
    """
    check_positive_int("step", step, allow_zero=True)
    check_positive_int("warmup_steps", warmup_steps, allow_zero=True)
    check_choice("kind", kind, SCHEDULES)
    if kind in ("linear", "cosine"):
        if total_steps is None:
            raise ValueError(f"total_steps is required for kind={kind!r}, got None")
        check_positive_int("total_steps", total_steps)
        if warmup_steps > total_steps:
            raise ValueError(f"warmup_steps must be <= total_steps ({total_steps}), got {warmup_steps}")
    if step < warmup_steps:
        return (step + 1) / warmup_steps
    if kind == "constant":
        return 1.0
    if kind == "inverse_sqrt":
        return math.sqrt(max(warmup_steps, 1) / (step + 1))
    progress = min(1.0, (step - warmup_steps) / max(1, total_steps - warmup_steps))  # 0 -> 1 over the decay
    if kind == "linear":
        return 1.0 - progress
    return 0.5 * (1.0 + math.cos(math.pi * progress))


def make_scheduler(
    optimizer: torch.optim.Optimizer, *, warmup_steps: int = 0, total_steps: Optional[int] = None, kind: str = "constant",
    start_step: int = 0,
) -> torch.optim.lr_scheduler.LambdaLR:
    """A ``LambdaLR`` that multiplies each group's learning rate by :func:`lr_schedule`; call ``.step()`` per update.

    ``start_step`` > 0 continues a schedule that an earlier scheduler ran for that many updates (the peak rate is each
    group's ``initial_lr``, which that scheduler set, else its ``lr``).
    """
    check_positive_int("start_step", start_step, allow_zero=True)
    lr_schedule(start_step, warmup_steps=warmup_steps, total_steps=total_steps, kind=kind)  # validate the arguments
    schedule = partial(lr_schedule, warmup_steps=warmup_steps, total_steps=total_steps, kind=kind)
    return torch.optim.lr_scheduler.LambdaLR(optimizer, lambda i: schedule(start_step + i))


# ------------------------------------------------------------------------------------------------ history
@dataclass
class History:
    """What :func:`fit` measured. Lists have one entry per optimizer step.

    Attributes:
        steps: step numbers 0..steps-1 (number of updates the model had when the loss was measured).
        train_loss: training loss of each step (mean over the global batch, token-weighted if reported).
        lr: learning rate used for each update.
        grad_norm: global L2 norm of the gradient before clipping.
        eval: ``(n_updates, metrics)`` pairs returned by ``eval_fn``.
        seconds: wall time of the training steps, evaluation excluded.
        tokens: tokens (or examples) processed, all processes together.
    """

    steps: list = field(default_factory=list)
    train_loss: list = field(default_factory=list)
    lr: list = field(default_factory=list)
    grad_norm: list = field(default_factory=list)
    eval: list = field(default_factory=list)
    seconds: float = 0.0
    tokens: int = 0

    @property
    def tokens_per_second(self) -> float:
        """Training throughput, all processes together."""
        return self.tokens / self.seconds if self.seconds > 0 else float("nan")

    @property
    def final_eval(self) -> Optional[dict]:
        """The last metrics returned by ``eval_fn`` (None if it never ran)."""
        return self.eval[-1][1] if self.eval else None

    def smoothed(self, window: int = 20) -> list:
        """Trailing moving average of ``train_loss`` over ``window`` steps (same length as ``train_loss``)."""
        check_positive_int("window", window)
        c = np.cumsum([0.0] + list(self.train_loss))
        return [float((c[i + 1] - c[max(0, i + 1 - window)]) / min(window, i + 1)) for i in range(len(self.train_loss))]

    def to_dict(self) -> dict:
        """A JSON-serialisable dict (with ``tokens_per_second``)."""
        d = dataclasses.asdict(self)
        d["eval"] = [[s, dict(m)] for s, m in self.eval]
        d["tokens_per_second"] = self.tokens_per_second
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "History":
        """Inverse of :meth:`to_dict`."""
        names = {f.name for f in dataclasses.fields(cls)}
        h = cls(**{k: v for k, v in d.items() if k in names})
        h.eval = [(int(s), dict(m)) for s, m in h.eval]
        return h


# ---------------------------------------------------------------------------------------------- the loop
def _split_loss(out, step: int, keep_tensor: bool = False):
    """``loss_fn``'s return value -> (scalar loss, n_tokens or None), validated.

    With ``keep_tensor`` a tensor count stays a tensor (read later, with the loss); otherwise it becomes an int.
    """
    n_tokens = None
    if isinstance(out, (tuple, list)):
        if len(out) != 2:
            raise TypeError(f"loss_fn must return a loss or (loss, n_tokens), got a {type(out).__name__} of "
                            f"length {len(out)} at step {step}")
        out, n_tokens = out
        if not (keep_tensor and isinstance(n_tokens, torch.Tensor) and n_tokens.numel() == 1):
            n_tokens = int(n_tokens)
    if not isinstance(out, torch.Tensor):
        raise TypeError(f"loss_fn must return a torch.Tensor loss, got {type(out).__name__} at step {step}")
    if out.dim() != 0:
        raise ValueError(f"loss_fn must return a scalar (0-dim) loss, got shape {tuple(out.shape)} at step {step}; "
                         "reduce it, e.g. with .mean()")
    return out, n_tokens


def _count_tokens(batch: Batch) -> int:
    """Fallback throughput unit: token ids in the first tensor if it holds integers, else examples."""
    x = batch[0]
    return x.numel() if not x.is_floating_point() else x.shape[0]


def _to_device(batch: Batch, device: torch.device) -> tuple:
    return tuple(t.to(device, non_blocking=True) for t in batch)


def fit(
    model: nn.Module,
    get_batch: Callable[[int], Batch],
    loss_fn: Callable,
    *,
    steps: int,
    lr: float = 3e-3,
    optimizer: Optional[torch.optim.Optimizer] = None,
    weight_decay: float = 0.0,
    warmup_steps: int = 0,
    schedule: str = "constant",
    clip_grad: Optional[float] = 1.0,
    eval_fn: Optional[Callable[[nn.Module], dict]] = None,
    eval_every: Optional[int] = None,
    log_every: Optional[int] = None,
    device: Union[str, torch.device, None] = None,
    amp: Optional[str] = None,
    compile: bool = False,
    progress: Optional[bool] = None,
    seed: Optional[int] = None,
    sync_every: Optional[int] = None,
    start_step: int = 0,
) -> History:
    """Train ``model`` in place for ``steps`` optimizer updates.

    Each step: ``batch = get_batch(step)``, moved to ``device`` (and sliced per rank when distributed);
    ``loss_fn(model, batch)``; backward; gradient clipping by global norm; optimizer and schedule step.

    Args:
        model: the module to train; it is moved to ``device`` and left in training mode.
        get_batch: ``step -> tuple of tensors``, the global batch (CPU or device). Under ``torchrun`` every rank must
            get the same batch, so derive its randomness from ``step`` or a seeded generator.
        loss_fn: ``(model, batch) -> loss`` or ``(loss, n_tokens)``; a mean over the batch (e.g. :func:`~transformer_lib.training.losses.lm_loss`).
            It must call ``model(...)`` (not another method) so that DistributedDataParallel syncs gradients.
        steps: number of optimizer updates.
        lr: peak learning rate of the default AdamW (ignored when ``optimizer`` is given).
        optimizer: an optimizer over ``model``'s parameters; default AdamW (Loshchilov & Hutter, 2019).
        weight_decay: AdamW decoupled weight decay, applied to matrices only (not biases, norms' gains).
        warmup_steps: linear warm-up steps of the schedule.
        schedule: one of ``SCHEDULES`` (see :func:`lr_schedule`); decays reach 0 at ``steps``.
        clip_grad: maximum global gradient norm, or None not to clip (the norm is recorded either way).
        eval_fn: ``model -> dict of metrics``, run under ``torch.no_grad()`` in eval mode on the unwrapped model,
            every ``eval_every`` updates and after the last one.
        eval_every: updates between evaluations (needs ``eval_fn``); None evaluates once, at the end.
        log_every: print a line with loss, lr and gradient norm every ``log_every`` updates (main process only).
        device: where to train; default :func:`get_device`.
        amp: None (float32) or ``'bf16'``: bfloat16 autocast. Meant for CUDA (Ampere or newer), where it is
            faster; on CPU it runs but is usually *slower* than float32 and only shows the numerics.
        compile: wrap the model with ``torch.compile`` — faster steps on GPU after a compilation that takes tens of
            seconds to minutes; rarely worth it for the book's CPU-sized runs.
        progress: show a ``tqdm`` progress bar (stderr, main process only). None (the default) shows one when
            the chapter runs its long GPU settings (:func:`~transformer_lib.notebook.use_gpu_settings`), where a
            reader waits minutes, and none in the short CPU runs whose outputs the book stores.
        seed: if given, :func:`set_seed` it before the first step (dropout, data drawn from the global RNG).
        sync_every: read the losses, gradient norms, token counts and the models' value checks (token ids in
            range) back to the host once every ``sync_every`` steps, all in one transfer; in between they stay on
            the device, so a GPU never waits for the host. None (the default): every step on the CPU, where a read
            costs nothing and an error stops training at once; every 16 steps on other devices. Under
            ``torchrun`` the loss is combined across processes every step.
        start_step: updates already made to ``model`` and ``optimizer`` by an earlier call, to continue that run:
            the schedule (warm-up and decay, which ends at ``start_step + steps``), ``get_batch``, the History's
            step numbers and the evaluations continue from there. Needs the earlier call's ``optimizer`` (its
            moments are part of the run). With a schedule that does not depend on the run's length (``'constant'``,
            ``'inverse_sqrt'``), ``fit(steps=a + b)`` and ``fit(steps=a)`` then ``fit(steps=b, start_step=a)`` make
            the same updates (``seed`` given to the first call only): a run can be extended after a look at it.

    Returns:
        A :class:`History`: every step's loss and gradient norm, whatever ``sync_every``.

    Raises:
        FloatingPointError: when the loss or the gradient norm becomes NaN or infinite (naming the step). With
            ``sync_every`` > 1 it is raised at the next read, so up to ``sync_every - 1`` later updates have
            already been applied to the model.
        ValueError: when a batch holds a token id outside the model's vocabulary (naming it); with
            ``sync_every`` > 1, at the next read.
    """
    # ---- validate the arguments before touching the model
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    for name, fn in (("get_batch", get_batch), ("loss_fn", loss_fn)):
        if not callable(fn):
            raise TypeError(f"{name} must be callable, got {type(fn).__name__} {fn!r}")
    check_positive_int("steps", steps)
    if isinstance(lr, bool) or not isinstance(lr, (int, float)) or not lr > 0 or not math.isfinite(lr):
        raise ValueError(f"lr must be a positive finite number, got {lr!r}")
    if isinstance(weight_decay, bool) or not isinstance(weight_decay, (int, float)) or not weight_decay >= 0:
        raise ValueError(f"weight_decay must be a number >= 0, got {weight_decay!r}")
    check_positive_int("warmup_steps", warmup_steps, allow_zero=True)
    check_choice("schedule", schedule, SCHEDULES)
    check_positive_int("start_step", start_step, allow_zero=True)
    if start_step > 0 and optimizer is None:
        raise ValueError(f"start_step={start_step} continues an earlier run and needs its optimizer, got optimizer=None")
    if warmup_steps > start_step + steps:
        raise ValueError(f"warmup_steps must be <= start_step + steps ({start_step + steps}), got {warmup_steps}")
    if clip_grad is not None and (isinstance(clip_grad, bool) or not isinstance(clip_grad, (int, float)) or not clip_grad > 0):
        raise ValueError(f"clip_grad must be a positive number or None, got {clip_grad!r}")
    if eval_fn is not None and not callable(eval_fn):
        raise TypeError(f"eval_fn must be callable or None, got {type(eval_fn).__name__}")
    if eval_every is not None:
        check_positive_int("eval_every", eval_every)
        if eval_fn is None:
            raise ValueError(f"eval_every={eval_every} needs an eval_fn, got eval_fn=None")
    if log_every is not None:
        check_positive_int("log_every", log_every)
    if amp not in AMP_MODES:
        raise ValueError(f"amp must be one of {list(AMP_MODES)}, got {amp!r}")
    if sync_every is not None:
        check_positive_int("sync_every", sync_every)

    # ---- device, processes, seed
    if device is None:
        device = get_device()
    else:
        try:
            device = torch.device(device)
        except (RuntimeError, TypeError) as err:
            raise ValueError(f"device must name a torch device such as 'cpu' or 'cuda', got {device!r}") from err
    distributed = _launched_distributed()
    if distributed:
        device = _init_distributed(device)
    n_procs, my_rank = (dist.get_world_size(), dist.get_rank()) if distributed else (1, 0)
    main = my_rank == 0
    if seed is not None:
        set_seed(seed)

    model.to(device)
    model.train()
    if optimizer is None:
        params = [p for p in model.parameters() if p.requires_grad]
        groups = [  # nanoGPT's convention: decay weight matrices and embeddings, not biases or norm gains
            {"params": [p for p in params if p.dim() >= 2], "weight_decay": weight_decay},
            {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0},
        ]
        # fused AdamW on CUDA: one kernel for all parameters, its step counters on the device (no host reads).
        # Elsewhere the multi-tensor ("foreach") implementation: the per-parameter arithmetic of the default loop,
        # bit for bit (tests/test_training.py), in a few calls instead of about ten per parameter. That matters for
        # a deep stack of small layers on a CPU: chapter 8's 12-block model of width 32 (149 parameter tensors)
        # trained 11 % faster per step (medians of six runs of 100 steps, one thread, 2026-12-02).
        optimizer = torch.optim.AdamW([g for g in groups if g["params"]], lr=lr,
                                      **({"fused": True} if device.type == "cuda" else {"foreach": True}))
    scheduler = make_scheduler(optimizer, warmup_steps=warmup_steps, total_steps=start_step + steps, kind=schedule,
                               start_step=start_step)

    net = model
    if distributed:
        net = nn.parallel.DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)
    if compile:
        net = torch.compile(net)
    autocast = (partial(torch.autocast, device_type=device.type, dtype=torch.bfloat16) if amp == "bf16"
                else nullcontext)
    params = [p for p in model.parameters() if p.requires_grad]

    history = History()

    def run_eval(n_updates: int) -> None:
        model.eval()
        with torch.no_grad():
            metrics = eval_fn(model)
        model.train()
        if not isinstance(metrics, dict):
            raise TypeError(f"eval_fn must return a dict of metrics, got {type(metrics).__name__}")
        metrics = {k: (v.item() if isinstance(v, torch.Tensor) and v.numel() == 1 else v) for k, v in metrics.items()}
        history.eval.append((n_updates, metrics))
        if log_every is not None and main:
            bar.write(f"eval after {n_updates} steps: " + ", ".join(
                f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}" for k, v in metrics.items()))

    if progress is None:
        from ..notebook import use_gpu_settings

        progress = use_gpu_settings()
    bar = _tqdm(total=steps, disable=not (progress and main))
    if sync_every is None:
        sync_every = 1 if device.type == "cpu" else 16
    defer = sync_every > 1 and not distributed
    # Steps whose loss, gradient norm, token count and queued checks have not been read yet.
    pending: list = []

    def read_pending() -> None:
        """One host read for the pending steps; record them, and raise the first error among them, in order."""
        if not pending:
            return
        # Everything the pending steps left on the device, as one float32 vector read in one transfer (token ids
        # and counts are exact in float32 below 2**24).
        values = []
        for _, loss_t, norm_t, n_t, checks in pending:
            values += [loss_t.float().reshape(1), norm_t.float().reshape(1)]
            if isinstance(n_t, torch.Tensor):
                values.append(n_t.float().reshape(1))
            values += [lo_hi.float().reshape(2) for _, _, lo_hi in checks]
        flat = torch.cat([v.to(device) for v in values]).tolist()
        i = 0
        for step, _, _, n_t, checks in pending:
            loss_v, norm_v = flat[i:i + 2]
            i += 2
            if isinstance(n_t, torch.Tensor):
                n_t = int(flat[i])
                i += 1
            for name, vocab_size, _ in checks:
                raise_deferred(name, vocab_size, int(flat[i]), int(flat[i + 1]))
                i += 2
            record(step, loss_v, norm_v, n_t)
        pending.clear()

    def record(step: int, loss_v: float, norm_v: float, n_tokens_v: Optional[int]) -> None:
        if not math.isfinite(loss_v):
            raise FloatingPointError(f"training loss is {loss_v} at step {step}; lower lr, enable clip_grad "
                                     "or check the data (e.g. a batch whose labels are all ignored)")
        if not math.isfinite(norm_v):
            raise FloatingPointError(f"gradient norm is {norm_v} at step {step}; lower lr or enable clip_grad")
        history.steps.append(step)
        history.train_loss.append(loss_v)
        history.grad_norm.append(norm_v)
        history.tokens += n_tokens_v if n_tokens_v is not None else fallback_tokens.pop(step)
        fallback_tokens.pop(step, None)
        bar.set_postfix(loss=f"{loss_v:.4f}", refresh=False)
        if log_every is not None and main and ((step + 1) % log_every == 0 or step == 0):
            bar.write(f"step {step + 1:>6}/{last + 1}  loss {loss_v:.4f}  lr {history.lr[step - start_step]:.2e}  "
                      f"grad_norm {norm_v:.3f}")

    fallback_tokens: dict = {}
    last = start_step + steps - 1                                   # the number of the last update of this call
    try:
        with deferred_checks() if defer else nullcontext():
            for step in range(start_step, last + 1):
                t0 = time.perf_counter()
                batch = get_batch(step)
                if not isinstance(batch, (tuple, list)) or not all(isinstance(t, torch.Tensor) for t in batch):
                    kinds = (type(batch).__name__ if not isinstance(batch, (tuple, list))
                             else "a sequence of " + ", ".join(type(t).__name__ for t in batch))
                    raise TypeError(f"get_batch({step}) must return a tuple of tensors, got {kinds}")
                if distributed:
                    batch = shard_batch(batch, my_rank, n_procs)
                fallback_tokens[step] = _count_tokens(batch) * n_procs
                batch = _to_device(batch, device)

                with autocast():
                    loss, n_tokens = _split_loss(loss_fn(net, batch), step, keep_tensor=defer)
                if not loss.requires_grad:
                    raise ValueError(f"loss_fn returned a loss that does not require grad at step {step}; was it "
                                     "computed under torch.no_grad() or detached?")
                if distributed:
                    # The global loss is the token-weighted mean over ranks; scaling each rank's loss by its token
                    # share makes DDP's gradient *average* equal the gradient of that global mean. NCCL reduces only
                    # CUDA tensors; Gloo reduces CPU ones.
                    n_local = 1 if n_tokens is None else n_tokens
                    stats = torch.tensor([loss.item() * n_local, n_local], dtype=torch.float64,
                                         device=device if device.type == "cuda" else "cpu")
                    dist.all_reduce(stats)
                    global_loss, n_global = (stats[0] / stats[1]).item(), int(stats[1].item())
                    if not math.isfinite(global_loss):
                        record(step, global_loss, 0.0, None)       # raises, naming the step
                    if n_tokens is not None:
                        loss = loss * (n_local * n_procs / n_global)
                    loss_for_history = torch.tensor(global_loss)
                    n_for_history = None if n_tokens is None else n_global
                else:
                    if not defer and not math.isfinite(loss.item()):
                        record(step, loss.item(), 0.0, None)        # raises before the update, naming the step
                    loss_for_history, n_for_history = loss.detach(), n_tokens

                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                norm = torch.nn.utils.clip_grad_norm_(params, clip_grad if clip_grad is not None else float("inf"))
                if not defer and not math.isfinite(float(norm)):
                    record(step, 0.0, float(norm), None)             # raises before the update, naming the step
                history.lr.append(optimizer.param_groups[0]["lr"])
                optimizer.step()
                scheduler.step()
                history.seconds += time.perf_counter() - t0

                checks = list(_deferred_queue(defer))
                pending.append((step, loss_for_history, norm.detach(), n_for_history, checks))
                bar.update(1)
                at_eval = eval_fn is not None and ((eval_every and (step + 1) % eval_every == 0) or step == last)
                at_log = log_every is not None and main and ((step + 1) % log_every == 0 or step == 0)
                if not defer or (step + 1) % sync_every == 0 or step == last or at_eval or at_log:
                    read_pending()
                if at_eval:
                    run_eval(step + 1)
            read_pending()
    finally:
        bar.close()
    return history


def _deferred_queue(defer: bool) -> list:
    """The checks queued by the step that just ran (and empty the queue for the next)."""
    if not defer:
        return []
    from ..checks import _DEFERRED

    queued = list(_DEFERRED.queue)
    _DEFERRED.queue.clear()
    return queued


def _tqdm(total: int, disable: bool):
    import tqdm  # plain tqdm (not tqdm.auto): one text line in notebooks, scripts and logs alike

    return tqdm.tqdm(total=total, leave=False, file=sys.stderr, disable=disable, dynamic_ncols=True)


# ---------------------------------------------------------------------------------------------- evaluate
def evaluate(model: nn.Module, batches: Iterable[Batch], loss_fn: Callable) -> float:
    """Mean loss over ``batches``, weighted by tokens when ``loss_fn`` returns ``(loss, n_tokens)``.

    Runs under ``torch.no_grad()`` in eval mode (the previous mode is restored) on this process only.

    Args:
        model: the module to evaluate.
        batches: an iterable of tuples of tensors (moved to the model's device).
        loss_fn: as for :func:`fit`.

    Returns:
        The mean loss, a float.
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    if not callable(loss_fn):
        raise TypeError(f"loss_fn must be callable, got {type(loss_fn).__name__}")
    first = next(iter(model.parameters()), None)
    device = first.device if first is not None else torch.device("cpu")
    was_training = model.training
    model.eval()
    total, weight = 0.0, 0
    try:
        with torch.no_grad():
            for i, batch in enumerate(batches):
                loss, n = _split_loss(loss_fn(model, _to_device(batch, device)), i)
                n = 1 if n is None else n
                total += loss.item() * n
                weight += n
    finally:
        model.train(was_training)
    if weight == 0:
        raise ValueError("batches is empty (or every batch reported n_tokens=0); expected at least one token")
    return total / weight
