"""The HTML pieces of the viewer's pages: the document shell (inline CSS, the one script, its CSP) and small
builders that escape what they are given (:func:`esc`); every record field is untrusted text.
"""

from __future__ import annotations

import base64
import hashlib
import html
from collections.abc import Sequence
from typing import Any

from harness.jsonl import dumps, loads_untrusted

CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:0 auto;max-width:1200px;padding:16px;color:#1b1b1b;background:#fff}
h1{font-size:20px;margin:0 0 8px}h2{font-size:17px;margin:24px 0 8px;border-bottom:1px solid #ddd}
h3{font-size:15px;margin:16px 0 6px}
pre{background:#f6f8fa;border:1px solid #e1e4e8;padding:6px 8px;overflow-x:auto;white-space:pre-wrap;
word-break:break-word;margin:4px 0;font:12px/1.4 ui-monospace,monospace}
table{border-collapse:collapse;margin:4px 0}td,th{border:1px solid #ddd;padding:3px 6px;vertical-align:top;
text-align:left}th{background:#f3f3f3}
.card{border:1px solid #d0d7de;border-radius:6px;padding:6px 10px;margin:8px 0}
.step{border-left:4px solid #57606a}.act{border-left:4px solid #0969da;background:#f8fbff}
.hint{border-left:4px solid #bf8700;background:#fffbea}.hint.repair{border-left-color:#cf222e;background:#fff5f5}
.badge{display:inline-block;border-radius:10px;padding:0 7px;font-size:12px;margin-left:4px;background:#eaeef2}
.ok{background:#dafbe1}.bad{background:#ffebe9}.tool{background:#ddf4ff}.control{background:#fbefff}
.turn{margin-top:18px;font-weight:600;color:#57606a}.muted{color:#6e7781}
.graph{overflow-x:auto;border:1px solid #e1e4e8;border-radius:6px;padding:4px}
.legend span{margin-right:12px}.legend i{display:inline-block;width:18px;height:4px;vertical-align:middle;
margin-right:4px}
.tokens{white-space:pre-wrap}.tokens .m{background:#c8f7c5}.tokens .e{background:#e8e8e8;color:#444}
.bar{display:inline-block;height:10px;background:#0969da;vertical-align:middle}
summary{cursor:pointer}
"""

SCRIPT = r"""(function () {
  var errors = [];
  window.addEventListener('error', function (event) {
    errors.push(String(event.message || event));
    document.body.setAttribute('data-errors', errors.join(' | '));
  });
  var slider = document.getElementById('store-at');
  var label = document.getElementById('store-at-label');
  function show(at) {
    var items = document.querySelectorAll('[data-at]');
    for (var i = 0; i < items.length; i++) {
      items[i].style.display = Number(items[i].getAttribute('data-at')) <= at ? '' : 'none';
    }
    if (label) { label.textContent = String(at); }
  }
  var linked = /^#at=(\d+)$/.exec(window.location.hash);
  if (slider && linked) { slider.value = linked[1]; }
  if (slider) {
    slider.addEventListener('input', function () { show(Number(slider.value)); });
    show(Number(slider.value));
  }
  document.body.setAttribute('data-ready', '1');
})();"""


def esc(value: Any) -> str:
    """``value`` as text safe inside HTML elements and quoted attributes."""
    return html.escape("" if value is None else str(value), quote=True)


def json_text(value: Any) -> str:
    """``value`` as indented JSON text."""
    return dumps(value, indent=1, default=str)  # a lone surrogate as its escape text \\udc00


def pre(text: Any, cls: str = "") -> str:
    """``text`` escaped in a ``<pre>``."""
    return f'<pre class="{cls}">{esc(text)}</pre>' if cls else f"<pre>{esc(text)}</pre>"


def pretty(text: Any) -> str:
    """A tool result or raw text, re-indented when it is JSON."""
    if isinstance(text, str):
        try:
            return json_text(loads_untrusted(text))
        except (ValueError, RecursionError):  # not JSON, or nested too deep to re-indent
            return text
    return json_text(text)


def details(summary: str, body: str) -> str:
    """A folded ``<details>`` block; ``body`` is HTML already."""
    return f"<details><summary>{esc(summary)}</summary>{body}</details>"


def badge(text: Any, cls: str = "") -> str:
    """``text`` escaped in a badge."""
    return f'<span class="badge {cls}">{esc(text)}</span>'


def table(header: Sequence[str] | None, rows: Sequence[Sequence[str]], row_attrs: Sequence[str] | None = None) -> str:
    """A table; cells are HTML already (escape them first), ``row_attrs`` extra attributes per row."""
    head = "<thead><tr>" + "".join(f"<th>{esc(h)}</th>" for h in header) + "</tr></thead>" if header else ""
    attrs = row_attrs or [""] * len(rows)
    body = "".join(
        f"<tr{a}>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for a, row in zip(attrs, rows, strict=True)
    )
    return f"<table>{head}<tbody>{body}</tbody></table>"


def page(title: str, body: str) -> str:
    """The HTML document around ``body``: inline CSS, the one script, a CSP that allows only that script."""
    digest = base64.b64encode(hashlib.sha256(SCRIPT.encode()).digest()).decode()
    csp = f"default-src 'none'; img-src data:; style-src 'unsafe-inline'; script-src 'sha256-{digest}'"
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{csp}">'
        f"<title>{esc(title)}</title><style>{CSS}</style></head>\n<body>\n{body}\n<script>{SCRIPT}</script>\n"
        "</body></html>\n"
    )
