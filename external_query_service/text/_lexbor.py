"""Reading the lexbor tree resiliparse parses: what ``page_title`` and ``page_date`` share.

resiliparse is imported by the functions that need it (it has no wheel on every platform, and
the fast reading that parses with it is optional).
"""

from __future__ import annotations

from typing import Any, Final

__all__ = ["JSON_SCRIPTS", "JSON_TYPES", "DOMNode", "own_text", "select_all"]

# A lexbor element or document node. Typed loosely: resiliparse's stubs type query results as
# its base node class, which declares none of the element methods used here.
DOMNode = Any

#: The ``type``s of ``<script>`` whose JSON (JSON-LD) trafilatura and htmldate read, compared
#: exactly, as their XPath compares them.
JSON_TYPES: Final = frozenset({"application/ld+json", "application/settings+json"})
#: Those scripts as a selector. lexbor matches ``type`` without case, so it finds a superset:
#: test each script's type against ``JSON_TYPES``.
JSON_SCRIPTS: Final = ", ".join(f'script[type="{kind}"]' for kind in sorted(JSON_TYPES))


def select_all(node: DOMNode, selector: str) -> list[DOMNode]:
    """The elements under ``node`` matching ``selector``, in document order."""
    # ``values()``, not iteration: resiliparse finds a collection's i-th item by walking its
    # first i items, so iterating a collection costs the square of its length.
    nodes: list[DOMNode] = node.query_selector_all(selector).values()
    return nodes


def own_text(node: DOMNode) -> str | None:
    """lxml's ``element.text``: the text before the element's first child element (None when
    there is none), comments skipped, as the lxml parse drops them."""
    from resiliparse.parse.html import NodeType

    parts: list[str] = []
    child = node.first_child
    while child is not None and child.type != NodeType.ELEMENT:
        if child.type == NodeType.TEXT:
            parts.append(child.text or "")
        child = child.next_sibling
    return "".join(parts) or None
