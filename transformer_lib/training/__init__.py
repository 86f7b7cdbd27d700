"""Training: device, seeding, learning-rate warm-up, the ``fit`` loop, evaluation, and independent runs side by side.

Every chapter trains its models through :func:`~transformer_lib.training.loop.fit`, so a chapter states *what* is
learned (a model, a ``get_batch(step)`` function and a loss) and never re-writes the loop. The same call runs
unchanged on a CPU, a GPU, or several processes under ``torchrun`` (data parallelism, below).

Conventions:
    * ``get_batch(step)`` returns a tuple of tensors holding the **global** batch, batch-first.
    * ``loss_fn(model, batch)`` returns a scalar loss, or ``(loss, n_tokens)`` when the loss is a mean over
      tokens; ``n_tokens`` then weights the logged loss and the throughput.
    * A step number counts optimizer updates: ``History.train_loss[i]`` is measured on the model after ``i``
      updates, and an entry ``(n, metrics)`` of ``History.eval`` on the model after ``n`` updates, so both can
      share one x axis.

Data parallelism (Li et al., 2020, "PyTorch Distributed"): under ``torchrun`` every process (rank) builds the same
model and calls ``get_batch(step)`` for the same global batch; :func:`~transformer_lib.training.loop.fit` keeps
rank ``r``'s contiguous slice of rows, wraps the model in ``DistributedDataParallel`` (which averages gradients
across ranks during ``backward``) and all-reduces the logged loss. With a mean loss the averaged gradient is the
gradient of the global-batch loss, so a 2-process run follows a 1-process run up to float rounding.

The package's modules: :mod:`~transformer_lib.training.loop` (device, seeds, schedules, the ``fit`` loop and its
``History``, evaluation), :mod:`~transformer_lib.training.losses`, :mod:`~transformer_lib.training.runs`
(a learning-rate search, independent runs side by side), :mod:`~transformer_lib.training.distributed` (the process
bookkeeping of data parallelism) and :mod:`~transformer_lib.training.checkpoints`. Every public name is importable
from the package (``tl.training.fit``, ``tl.training.lm_loss``).
"""
from .checkpoints import load_checkpoint, save_checkpoint
from .distributed import is_main_process, rank, shard_batch, unwrap_model, world_size
from .loop import AMP_MODES, SCHEDULES, History, evaluate, fit, get_device, lr_schedule, make_scheduler, set_seed
from .losses import classification_loss, lm_loss, seq2seq_loss
from .runs import map_runs, map_runs_processes, tune_lr

__all__ = ["AMP_MODES", "History", "SCHEDULES", "classification_loss", "evaluate", "fit", "get_device",
           "is_main_process", "lm_loss", "load_checkpoint", "lr_schedule", "make_scheduler", "map_runs",
           "map_runs_processes", "rank", "save_checkpoint", "seq2seq_loss", "set_seed", "shard_batch", "tune_lr",
           "unwrap_model", "world_size"]
