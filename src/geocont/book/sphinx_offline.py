"""A small Sphinx extension that keeps the rendered book self-contained and its console clean.

Jupyter Book 1 always loads sphinx-thebe, which writes an inline script pointing at the thebe
bundle on a CDN (unpkg.com) into every page, and writes it twice, so that every page logs
``Identifier 'THEBE_JS_URL' has already been declared``. The book has no live-code buttons, so
this extension drops thebe's scripts from every page (and any script included twice). It is
enabled in ``_config.yml`` (``sphinx: extra_extensions``).
"""

from __future__ import annotations


def _is_thebe(script) -> bool:
    filename = getattr(script, "filename", None) or ""
    body = (getattr(script, "attributes", None) or {}).get("body", "")
    return "thebe" in filename.lower() or "THEBE_JS_URL" in body


def _drop_thebe_and_duplicates(app, pagename, templatename, context, doctree) -> None:
    scripts = context.get("script_files")
    if scripts is None:
        return
    kept, seen = [], set()
    for script in scripts:
        key = (getattr(script, "filename", None), tuple(sorted((getattr(script, "attributes", None) or {}).items())))
        if _is_thebe(script) or key in seen:
            continue
        seen.add(key)
        kept.append(script)
    scripts[:] = kept


def setup(app):
    app.connect("html-page-context", _drop_thebe_and_duplicates, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
