"""The book's own tooling (not part of transformer_lib): reading and writing the chapter notebooks,
comparing their outputs within declared tolerances, and generating the Colab edition.

Its command-line tools run from the repository root as ``python -m booktools.<tool>`` (``make`` does so); the
tests import it from the root too (pytest's ``pythonpath``). It is not installed: what the grader's sandbox must not
see (the reference solutions of the exercises, booktools/exercise_references.py) stays outside every installed
package.
"""
