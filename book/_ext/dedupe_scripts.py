"""Sphinx extension: drop exact duplicates from each page's scripts.

Under Jupyter Book 1, sphinx-thebe registers its inline configuration script
(`const THEBE_JS_URL = ...`) twice on every page, once with a file name of
None and once with "", and the browser reported "Uncaught SyntaxError:
Identifier 'THEBE_JS_URL' has already been declared". (sphinx-togglebutton's
inline script is doubled the same way, harmlessly.)
Keeping the first copy of each identical script fixes the page without
touching the extension.
"""


def _key(script):
    # A script is its file name and its attributes, which hold the body of an
    # inline script. Inline scripts arrive with a file name of None or "".
    filename = getattr(script, "filename", script) or ""
    attributes = getattr(script, "attributes", {})
    return str(filename), tuple(sorted((k, str(v)) for k, v in attributes.items()))


def dedupe_scripts(app, pagename, templatename, context, doctree):
    scripts = context.get("script_files")
    if not scripts:
        return
    seen, unique = set(), []
    for script in scripts:
        key = _key(script)
        if key not in seen:
            seen.add(key)
            unique.append(script)
    scripts[:] = unique


def setup(app):
    app.connect("html-page-context", dedupe_scripts)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
