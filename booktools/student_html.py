"""HTML fixes of the student book (booktools/make_student_book.py), a Sphinx extension of its build: the duplicated
inline script of sphinx-thebe is removed as in the main book (:mod:`booktools.book_html`); the launch button is not
rewritten to the Colab edition: it opens the student notebook."""

from booktools.book_html import dedupe_scripts


def setup(app):
    app.connect("html-page-context", dedupe_scripts, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True, "version": "1.0"}
