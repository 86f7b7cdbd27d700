"""What the explorers of :mod:`~transformer_lib.widgets` share: figures without ``pyplot``, token labels on their
axes, the PNG/text outputs of a view, and the :func:`explorer` that wires controls to a render function.

These are the package's own building blocks, used by its modules; :mod:`~transformer_lib.widgets` does not
re-export them. The explorers check their inputs once, in their public functions, with the library's checks
(``as_tensor``, ``check_labels``); a redraw runs on the checked values."""
from __future__ import annotations

import base64
import functools
import io
from typing import Callable, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np
import torch

ArrayLike = Union[torch.Tensor, np.ndarray]
DPI = 90  # small PNGs keep the executed notebooks light


# ----------------------------------------------------------------------------------------------------------------
# Shared helpers
# ----------------------------------------------------------------------------------------------------------------
def require_widgets():
    """The ``ipywidgets`` module, or an ImportError that says how to install it."""
    try:
        import ipywidgets
    except ImportError as err:  # pragma: no cover - exercised by monkeypatching in the tests
        raise ImportError('the interactive explorers need ipywidgets: pip install "transformer_lib[widgets]"') from err
    return ipywidgets


def show_token(token: str) -> str:
    """Make whitespace tokens visible on an axis (character-level vocabularies)."""
    return {" ": "␣", "\n": "\\n", "\t": "\\t", "": "∅"}.get(token, token)


def rotated(labels: Sequence[str]) -> bool:
    """Whether tick labels along x are turned by 45° (long labels, or many of them)."""
    longest = max(map(len, labels), default=0)
    return longest > 6 or (longest > 2 and len(labels) > 8)


def figure(width: float, height: float, xlabels: Sequence[str] = (), ylabels: Sequence[str] = (),
           top: float = 0.4, right: float = 0.2, wspace: float = 0.3, bottom_extra: float = 0.0,
           left_extra: float = 0.0):
    """A Figure without pyplot and with fixed margins in inches, grown to fit long token labels.

    A layout engine (constrained/tight) would double the drawing time; the explorers must redraw in well under
    0.3 s, so the margins are computed here instead.
    """
    from matplotlib.figure import Figure
    xlabels = [show_token(t) for t in xlabels]
    ylabels = [show_token(t) for t in ylabels]
    longest_x = max(map(len, xlabels), default=0)
    bottom = 0.5 + bottom_extra + (0.06 * longest_x + 0.1 if rotated(xlabels) else 0.0)
    left = 0.55 + left_extra + 0.075 * max(max(map(len, ylabels), default=0) - 3, 0)
    height = height + bottom - 0.5
    width = width + left - 0.55
    fig = Figure(figsize=(width, height), dpi=DPI)
    fig.subplots_adjust(left=left / width, right=1 - right / width, bottom=bottom / height, top=1 - top / height,
                        wspace=wspace)
    return fig


def token_axis(ax, labels: Sequence[str], axis: str = "x") -> None:
    """One tick per token on the ``'x'`` or ``'y'`` axis, whitespace made visible (:func:`show_token`)."""
    ticks = range(len(labels))
    rotate = 45 if rotated(labels) else 0
    labels = [show_token(t) for t in labels]
    if axis == "x":
        ax.set_xticks(ticks, labels, rotation=rotate, ha="right" if rotate else "center")
    else:
        ax.set_yticks(ticks, labels)


def token_grid(ax, x_tokens: Optional[Sequence[str]], y_tokens: Optional[Sequence[str]],
                xlabel: Optional[str] = None, ylabel: Optional[str] = None) -> None:
    """Give a grid drawn by :mod:`~transformer_lib.plotting` the explorers' look: square cells and token tick
    labels as :func:`token_axis` writes them (the margins of :func:`figure` are computed for those labels)."""
    ax.set_aspect("equal")
    if x_tokens is not None:
        token_axis(ax, x_tokens)
    if y_tokens is not None:
        token_axis(ax, y_tokens, "y")
    if xlabel is not None:
        ax.set_xlabel(xlabel)
    if ylabel is not None:
        ax.set_ylabel(ylabel)


def entropy(p: np.ndarray) -> float:
    """The entropy of a distribution, in nats (zero probabilities contribute nothing)."""
    p = p[p > 0]
    return float(-(p * np.log(p)).sum())


def png_output(fig) -> dict:
    """A figure as a notebook ``display_data`` output (a PNG); the figure is cleared."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=DPI)
    fig.clear()
    data = base64.b64encode(buffer.getvalue()).decode("ascii")
    return {"output_type": "display_data", "metadata": {},
            "data": {"image/png": data, "text/plain": "<Figure>"}}


def text_output(text: str, stream: str = "stdout") -> dict:
    """A line of text as a notebook ``stream`` output."""
    return {"output_type": "stream", "name": stream, "text": text if text.endswith("\n") else text + "\n"}


def html_output(markup: str, plain: str) -> dict:
    """HTML (with its plain-text form) as a notebook ``display_data`` output."""
    return {"output_type": "display_data", "metadata": {}, "data": {"text/html": markup, "text/plain": plain}}


def to_outputs(items) -> Tuple[dict, ...]:
    """What a render function returns (Figures, strings, output dicts) as notebook outputs."""
    from matplotlib.figure import Figure
    outputs = []
    for item in items:
        if isinstance(item, Figure):
            outputs.append(png_output(item))
        elif isinstance(item, str):
            outputs.append(text_output(item))
        else:
            outputs.append(item)
    return tuple(outputs)


def explorer(controls: Dict[str, object], render: Callable[..., Sequence], on_change: Optional[Callable] = None):
    """VBox(controls…, Output) re-rendered whenever a control changes; the first view is rendered now.

    ``render(**values)`` returns Figures, strings and ready-made output dicts; they are written straight into
    ``Output.outputs`` so the saved widget state (and the static HTML) contains them. ``on_change(name, value)``
    may adjust dependent controls (e.g. a slider's maximum) before the single re-render.
    """
    widgets = require_widgets()
    out = widgets.Output()
    busy = [False]

    def refresh(change=None, name=None):
        if busy[0]:
            return
        busy[0] = True
        try:
            if on_change is not None and change is not None:
                on_change(name, change["new"])
            values = {key: control.value for key, control in controls.items()}
            out.outputs = to_outputs(render(**values))
        except Exception as err:  # shown to the reader instead of disappearing into the kernel log
            if change is None:
                raise
            out.outputs = (text_output(f"{type(err).__name__}: {err}", "stderr"),)
        finally:
            busy[0] = False

    for name, control in controls.items():
        control.style.description_width = "initial"
        control.observe(functools.partial(refresh, name=name), names="value")
    refresh()
    box = widgets.VBox(list(controls.values()) + [out])
    box.controls, box.out, box.refresh = controls, out, refresh
    return box


def token_options(tokens: Sequence[str]) -> List[Tuple[str, int]]:
    """A dropdown's ``(label, index)`` options, one per token."""
    return [(f"{i}: {show_token(t)}", i) for i, t in enumerate(tokens)]

