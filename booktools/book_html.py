"""Small fixes to the book's HTML pages: a Sphinx extension of the build (``_config.yml``'s
``local_extensions`` names it ``booktools.book_html`` with the repository root as its path).

- sphinx-thebe (loaded by Jupyter Book even with thebe off) registers its inline configuration
  script more than once per build; the second copy re-declares ``const THEBE_JS_URL`` and raises
  a JavaScript SyntaxError on every page. Keep one copy of each inline script.
- The Colab launch button of a chapter opens the Colab edition, ``colab/NN_topic.ipynb``
  (booktools/make_colab_edition.py), instead of ``chapters/NN_topic.ipynb``, which sphinx-book-theme
  derives from the page name: the edition's markdown is plain Markdown that Colab renders.
- The test harness stays out of sight: the tolerance declarations that nbval reads
  (``# nbval-tolerance: ...``) are removed from the code cells as the page shows them
  (``booktools.notebooks.reader_source``); the executed notebook keeps them.
"""

from __future__ import annotations

from booktools.notebooks import HARNESS_LINE, COLAB_LINK_PREFIX, colab_edition_target, reader_source


def dedupe_scripts(app, pagename, templatename, context, doctree):
    scripts = context.get("script_files")
    if not scripts:
        return
    seen, unique = set(), []
    for script in scripts:
        attributes = getattr(script, "attributes", {}) or {}
        filename = getattr(script, "filename", script) or ""  # inline scripts: None or ""
        key = (str(filename), tuple(sorted((k, str(v)) for k, v in attributes.items())))
        if key not in seen:
            seen.add(key)
            unique.append(script)
    context["script_files"] = unique


def colab_edition_links(app, pagename, templatename, context, doctree):
    """Point the Colab launch button of a chapter page at its notebook of the Colab edition."""
    target = colab_edition_target(pagename)
    if target is None:
        return

    def rewrite(buttons):
        for button in buttons or []:
            url = button.get("url") or ""
            if url.startswith(COLAB_LINK_PREFIX) and url.endswith(f"/{pagename}.ipynb"):
                button["url"] = url[: -len(f"{pagename}.ipynb")] + target
            rewrite(button.get("buttons"))

    rewrite(context.get("header_buttons"))


def hide_harness(app, doctree):
    """Drop the nbval tolerance lines from the code of every notebook cell on the page."""
    from docutils import nodes

    for block in list(doctree.findall(nodes.literal_block)):
        parent = block.parent
        if parent is None or "cell_input" not in parent.get("classes", []):
            continue
        text = block.astext()
        if not any(HARNESS_LINE.match(line) for line in text.split("\n")):
            continue
        shown = reader_source(text)
        new = nodes.literal_block(shown, shown, **{k: v for k, v in block.attributes.items()
                                                    if k not in ("ids", "backrefs", "dupnames")})
        new["ids"] = block["ids"]
        block.replace_self(new)


def setup(app):
    app.connect("doctree-read", hide_harness)
    app.connect("html-page-context", dedupe_scripts, priority=900)
    # after sphinx-book-theme's add_launch_buttons (priority 501), before the page is rendered
    app.connect("html-page-context", colab_edition_links, priority=600)
    return {"parallel_read_safe": True, "parallel_write_safe": True, "version": "1.0"}
