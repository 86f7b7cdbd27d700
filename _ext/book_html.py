"""Small fixes to the book's HTML pages (a local Sphinx extension, see _config.yml).

- sphinx-thebe (loaded by Jupyter Book even with thebe off) registers its inline configuration
  script more than once per build; the second copy re-declares ``const THEBE_JS_URL`` and raises
  a JavaScript SyntaxError on every page. Keep one copy of each inline script.
"""

from __future__ import annotations


def _dedupe_scripts(app, pagename, templatename, context, doctree):
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


def setup(app):
    app.connect("html-page-context", _dedupe_scripts, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True, "version": "1.0"}
