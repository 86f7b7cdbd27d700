"""The Colab edition runs in a simulated Colab: every notebook that a Colab link of the book opens
(colab/NN_topic.ipynb) is executed top to bottom in a kernel that has only what Colab preinstalls.

`make test-colab` builds the environment first: .venv-colab with torch, numpy, matplotlib, pandas,
ipywidgets, tqdm, transformers, sentencepiece, safetensors, ipykernel and requests
(tests/colab_preinstalled.txt), and none of the book's tools (myst-nb, jupyter-book, sacrebleu,
nbval, jupytext, pytest) nor transformer_lib. Then, for each notebook:

- the kernel's python is .venv-colab/bin/python (a kernelspec in a temporary JUPYTER_PATH), and an
  IPython start-up file imports a fake ``google.colab`` (``output.enable_custom_widget_manager`` is a
  no-op), so ``"google.colab" in sys.modules`` is true as in Colab;
- the Colab set-up cell really pip-installs the library: ``TRANSFORMER_BOOK_SPEC=file://<copy>``
  replaces ``git+<repository url>``, where <copy> is a copy of this checkout's files (what a clone
  would hold, uncommitted changes included; building in the checkout itself would leave build/ there);
  pip runs offline there (``PIP_NO_INDEX=1``, no build isolation: OFFLINE_PIP below);
- ``BOOK_SETTINGS=gpu BOOK_MAX_STEPS=3``: every chapter takes its GPU branch, capped at 3 steps, with the
  smaller sizes tests/smoke_settings.py declares for it (``BOOK_SMOKE``, set per notebook);
- the working directory is an empty folder, as Colab's /content.

transformer_lib is uninstalled from .venv-colab before the first notebook, so the set-up cell must
install it. A failure names the notebook and the cell. ``COLAB_NOTEBOOKS="colab/01_impact.ipynb ..."``
(``make test-colab NB=...``; chapters/NN_topic.ipynb is accepted too) runs only those notebooks.
Without .venv-colab the tests are skipped, unless BOOK_REQUIRE_COLAB=1 (as `make test-colab` sets).

`make test-colab` runs two notebooks at a time (pytest-xdist). Each worker then has an environment of its own,
.venv-colab-workers/<worker>, a copy of .venv-colab made of hard links (made in seconds, no disk space for
the packages), so that one worker's set-up cell never installs the library while another's kernel imports it;
pip replaces files rather than writing into them, so nothing a worker installs reaches .venv-colab.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
import warnings
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
from booktools import colab, notebooks  # noqa: E402
from smoke_settings import SMOKE  # noqa: E402  (pytest puts this folder on sys.path)

pytestmark = pytest.mark.slow

COLAB_VENV = ROOT / ".venv-colab"
COLAB_PY = COLAB_VENV / "bin" / "python"
WORKER_VENVS = ROOT / ".venv-colab-workers"   # one copy of .venv-colab per pytest-xdist worker (ignored by git)
KERNEL = "simulated-colab"
BOOK_TOOLS = ("myst_nb", "jupyter_book", "sacrebleu", "nbval", "jupytext", "pytest", "transformer_lib")
CELL_TIMEOUT = 600
# A notebook that takes longer than this in the capped run is reported with its slowest cells (a warning): in a clean
# make test on 2026-12-02 chapter 1, which trains nothing, took 610 s where it takes about 25, and nothing said where
# the time went (an explorer cell: booktools.notebooks.without_output_widgets).
SLOW_NOTEBOOK = 150
SETTINGS = {"BOOK_SETTINGS": "gpu", "BOOK_MAX_STEPS": "3"}
# The set-up cell's pip, offline. Colab's pip would fetch setuptools from PyPI to build the library in an
# isolated environment; here it builds with the setuptools .venv-colab holds (torch requires it) and may consult
# no index, so the test downloads nothing and cannot wait on a network (on 2026-12-02, while it still fetched
# setuptools, one notebook took 617 s instead of about 20 in a clean make test, most likely waiting for the package
# index). PIP_NO_BUILD_ISOLATION is one of pip's inverted options: "false" turns isolation off.
OFFLINE_PIP = {"PIP_NO_INDEX": "1", "PIP_NO_BUILD_ISOLATION": "false"}

FAKE_COLAB = {
    "google/colab/__init__.py": '"""A stand-in for Google Colab\'s package (tests/test_colab.py)."""\n'
                                "from google.colab import output  # noqa: F401\n",
    "google/colab/output.py": "def enable_custom_widget_manager():\n"
                              '    """Colab: let ipywidgets 8 render. Here: nothing to do."""\n',
}
# The kernel's PYTHONPATH holds the stand-in package (FAKE_COLAB, written by simulated_colab).
STARTUP = """\
# Simulated Colab (tests/test_colab.py): Colab's kernel has google.colab imported at start-up.
import google.colab  # noqa: F401
"""
PROBE = """\
import json, os, sys, transformer_lib
from transformer_lib.notebook import use_gpu_settings
print("PROBE", "google.colab" in sys.modules, use_gpu_settings(), transformer_lib.__file__)
print("SMOKE", json.dumps(json.loads(os.environ.get("BOOK_SMOKE", "{}"))))
print("PIP", json.dumps({k: v for k, v in os.environ.items() if k in ("PIP_NO_INDEX", "PIP_NO_BUILD_ISOLATION")}))
"""


def selected() -> list[Path]:
    chapters = [p for p in notebooks.toc_chapters() if p.is_file()]
    paths = [colab.edition_path(p) for p in chapters]
    wanted = os.environ.get("COLAB_NOTEBOOKS", "").split()
    if wanted:
        names = {Path(w).name for w in wanted}
        paths = [p for p in paths if p.name in names]
        assert paths, f"COLAB_NOTEBOOKS={wanted} names no notebook of the Colab edition"
    return paths


def colab_python(python: Path, code: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    return subprocess.run([str(python), "-c", code], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=300)


def worker_venv(worker: str) -> Path:
    """A copy of .venv-colab for one pytest-xdist worker, its files hard links to those of .venv-colab (a
    full copy where the file system has no hard links). The copy's python is a symbolic link, as in any
    virtual environment; Python finds the environment from the path it was started by, so packages are
    installed into, and imported from, the copy."""
    target = WORKER_VENVS / worker
    shutil.rmtree(target, ignore_errors=True)
    target.parent.mkdir(exist_ok=True)
    try:
        shutil.copytree(COLAB_VENV, target, symlinks=True, copy_function=os.link)
    except OSError:
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(COLAB_VENV, target, symlinks=True)
    return target


def copy_checkout(target: Path) -> None:
    """The files a clone of this checkout would hold (tracked and untracked, not ignored)."""
    try:
        listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                                cwd=ROOT, capture_output=True, check=True).stdout.decode().split("\0")
    except (OSError, subprocess.CalledProcessError):
        listed = ["pyproject.toml", "README.md"] + [str(p.relative_to(ROOT))
                                                     for p in (ROOT / "transformer_lib").rglob("*.py")]
    for name in filter(None, listed):
        source = ROOT / name
        if source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)


@pytest.fixture(scope="module")
def simulated_colab(tmp_path_factory):
    """The kernelspec, fake google.colab, a copy of the checkout; transformer_lib uninstalled."""
    if not COLAB_PY.is_file():
        message = "no simulated Colab environment (.venv-colab): run `make test-colab`"
        if os.environ.get("BOOK_REQUIRE_COLAB") == "1":
            pytest.fail(message)
        pytest.skip(message)
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    venv = worker_venv(worker) if worker else COLAB_VENV
    python = venv / "bin" / "python"
    base = tmp_path_factory.mktemp("colab")
    fake = base / "fake"
    for name, text in FAKE_COLAB.items():
        (fake / name).parent.mkdir(parents=True, exist_ok=True)
        (fake / name).write_text(text, encoding="utf-8")
    ipython = base / "ipython"
    startup = ipython / "profile_default" / "startup" / "00-google-colab.py"
    startup.parent.mkdir(parents=True)
    startup.write_text(STARTUP, encoding="utf-8")
    checkout = base / "checkout"
    copy_checkout(checkout)

    spec_dir = base / "jupyter" / "kernels" / KERNEL
    spec_dir.mkdir(parents=True)
    env = {"IPYTHONDIR": str(ipython), "PYTHONPATH": str(fake), notebooks.SPEC_VARIABLE: checkout.as_uri(),
           **SETTINGS, **OFFLINE_PIP, "PYTHONHASHSEED": "0"}
    (spec_dir / "kernel.json").write_text(json.dumps({
        "argv": [str(python), "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Python 3 (simulated Colab)", "language": "python", "env": env}), encoding="utf-8")

    # Nothing of the book may be there before a set-up cell installs it.
    uninstall = subprocess.run([str(python), "-m", "pip", "uninstall", "-y", "transformer_lib"],
                               capture_output=True, text=True)
    assert uninstall.returncode == 0, uninstall.stderr
    check = colab_python(python, "import importlib.util as u; print([m for m in %r if u.find_spec(m)])"
                         % (BOOK_TOOLS,), cwd=base)
    assert check.returncode == 0 and check.stdout.strip() == "[]", (
        f".venv-colab must not hold the book's tools nor transformer_lib before the set-up cell runs: "
        f"{check.stdout}{check.stderr} (remove .venv-colab and run `make test-colab`)")
    yield {"base": base, "jupyter_path": base / "jupyter", "checkout": checkout, "venv": venv, "python": python}
    if venv != COLAB_VENV:
        shutil.rmtree(venv, ignore_errors=True)   # removes the links only: .venv-colab keeps its files


def slow_report(path: Path, nb, seconds: float, cell_seconds: dict[int, float]) -> str:
    """Which cells took the time of a slow notebook: a warning in pytest's summary, which a passing run shows too."""
    slowest = sorted(cell_seconds.items(), key=lambda item: -item[1])[:3]
    cells = "; ".join(f"{where(path, index, nb.cells[index])}: {s:.0f} s" for index, s in slowest)
    return (f"{notebooks.relative(path)} took {seconds:.0f} s in the simulated Colab (more than {SLOW_NOTEBOOK} s); "
            f"slowest cells: {cells}")


def where(path: Path, index: int, cell) -> str:
    first = cell.source.strip().splitlines()[:1]
    return f"{notebooks.relative(path)}, cell {index} ({first[0][:70] if first else ''!r})"


ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def error_text(exc) -> str:
    """nbclient's message (the cell, its output, the traceback) without terminal colours, shortened."""
    text = ANSI.sub("", str(exc))
    return text if len(text) <= 6000 else "...\n" + text[-6000:]


@pytest.mark.parametrize("path", selected(), ids=lambda p: p.stem)
def test_notebook_runs_in_simulated_colab(path, simulated_colab, monkeypatch, tmp_path):
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError, CellTimeoutError

    assert path.is_file(), f"{notebooks.relative(path)} is missing: run `make colab`"
    for name in ("PYTHONPATH", "PYTHONHOME", "MPLBACKEND", notebooks.SPEC_VARIABLE):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("JUPYTER_PATH", str(simulated_colab["jupyter_path"]))
    smoke = json.dumps(SMOKE.get(path.stem, {}))   # the kernel inherits this process's environment
    monkeypatch.setenv("BOOK_SMOKE", smoke)
    content = tmp_path / "content"  # Colab's working directory: nothing of the repository in it
    content.mkdir()

    nb = nbformat.read(path, as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell(PROBE))
    client = notebooks.without_output_widgets(NotebookClient(nb, kernel_name=KERNEL, timeout=CELL_TIMEOUT,
                                                             allow_errors=False,
                                                             resources={"metadata": {"path": str(content)}}))
    started, failure, cell_seconds = time.perf_counter(), None, {}
    with client.setup_kernel():
        for index, cell in enumerate(nb.cells):
            if cell.cell_type != "code":
                continue
            cell_started = time.perf_counter()
            try:
                client.execute_cell(cell, index)
                cell_seconds[index] = time.perf_counter() - cell_started
            except (CellExecutionError, CellTimeoutError) as exc:
                failure = (f"{where(path, index, cell)} failed in the simulated Colab "
                           f"({', '.join(f'{k}={v}' for k, v in SETTINGS.items())}, BOOK_SMOKE={smoke}):\n"
                           f"{error_text(exc)}")
                break
    if failure:
        pytest.fail(failure, pytrace=False)
    seconds = time.perf_counter() - started
    if seconds > SLOW_NOTEBOOK:
        warnings.warn(slow_report(path, nb, seconds, cell_seconds), stacklevel=1)

    probe = "".join(o.get("text", "") for o in nb.cells[-1].outputs if o.get("output_type") == "stream")
    match = re.search(r"PROBE (\w+) (\w+) (\S+)", probe)
    assert match, f"{notebooks.relative(path)}: the probe cell printed {probe!r}"
    assert match[1] == "True", "google.colab was not imported in the kernel: the simulation is broken"
    assert match[2] == "True", "BOOK_SETTINGS=gpu did not reach the kernel: the GPU branch did not run"
    reached = re.search(r"SMOKE (.*)", probe)
    assert reached and json.loads(reached[1]) == json.loads(smoke), (
        f"{notebooks.relative(path)}: BOOK_SMOKE={smoke} did not reach the kernel (it saw {probe!r})")
    pip = re.search(r"PIP (.*)", probe)
    assert pip and json.loads(pip[1]) == OFFLINE_PIP, (
        f"{notebooks.relative(path)}: the set-up cell's pip did not run offline ({OFFLINE_PIP} not in the "
        f"kernel's environment: {probe!r})")
    installed = Path(match[3]).resolve()
    assert simulated_colab["venv"].resolve() in installed.parents, (
        f"{notebooks.relative(path)}: transformer_lib was imported from {installed}, not from the "
        f"copy the set-up cell installed into {simulated_colab['venv']}")
    setup = next(c for c in nb.cells if c.cell_type == "code")
    assert notebooks.BOOTSTRAP_MARKER in setup.source
    printed = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs
                      if o.get("output_type") == "stream")
    if any(notebooks.GLUE_PREFIX in key for c in nb.cells if c.cell_type == "code"
           for o in c.outputs for key in o.get("data", {})):
        assert re.search(r"^\w+ = ", printed, re.MULTILINE), (
            f"{notebooks.relative(path)}: in Colab, glue must print `name = value` for the reader")
    print(f"{notebooks.relative(path)}: {seconds:.1f} s in the simulated Colab")


FAILING_INSTALL = """\
import sys, types
google = types.ModuleType("google"); colab = types.ModuleType("google.colab")
colab.output = types.SimpleNamespace(enable_custom_widget_manager=lambda: None)
sys.modules.update({"google": google, "google.colab": colab, "google.colab.output": colab.output})
try:
    exec(compile(sys.stdin.read(), "<colab set-up cell>", "exec"), {"__name__": "__main__"})
except RuntimeError as exc:
    print("RAISED", exc)
"""


def test_setup_cell_reports_a_failed_install(simulated_colab, tmp_path):
    """With a wrong URL, the set-up cell shows pip's own error, says what to do, and raises."""
    missing = (tmp_path / "no-such-checkout").as_uri()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    result = subprocess.run([str(simulated_colab["python"]), "-c", FAILING_INSTALL],
                            input=notebooks.bootstrap_source(),
                            cwd=tmp_path, env={**env, **OFFLINE_PIP, notebooks.SPEC_VARIABLE: missing},
                            capture_output=True, text=True, timeout=300)
    out = result.stdout
    assert result.returncode == 0 and "RAISED" in out, out + result.stderr
    assert "ERROR" in out.split("RAISED")[0], f"pip's own error is not shown:\n{out}"
    assert missing in out and "run this cell again" in out, out
