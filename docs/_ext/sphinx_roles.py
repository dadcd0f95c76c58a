"""A griffe extension for the API reference: Sphinx roles in docstrings become code spans.

The docstrings are Google style but name other objects with Sphinx roles
(``:class:`~charmem.errors.BackendError```), which Markdown would show as ``:class:`` followed by
code. This turns each role into a plain code span: ``~a.b.C`` shows ``C``, ``a.b.C`` shows
``a.b.C``, ``text <a.b.C>`` shows ``text``. Nothing is linked, so a reference to a name another
page does not render can never break ``mkdocs build --strict``.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

_ROLE = re.compile(r":(?:py:)?(?:class|func|meth|mod|attr|data|obj|exc|const|ref|term):`([^`]+)`")


def _shown(target: str) -> str:
    titled = re.fullmatch(r"(.+?)\s*<([^>]+)>", target)
    if titled:
        return titled.group(1)
    if target.startswith("~"):
        return target[1:].rsplit(".", 1)[-1]
    return target


def plain_roles(text: str) -> str:
    """``text`` with every Sphinx role replaced by a code span of what it shows."""
    return _ROLE.sub(lambda match: f"`{_shown(match.group(1))}`", text)


class SphinxRolesToCode(griffe.Extension):
    """Rewrite the Sphinx roles of every docstring before mkdocstrings parses it."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        """Rewrite ``obj``'s docstring in place."""
        if obj.docstring is not None:
            obj.docstring.value = plain_roles(obj.docstring.value)
