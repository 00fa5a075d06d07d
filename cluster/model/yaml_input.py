"""YAML from outside (manifests, scheduler confs, workload and pool files), checked before it is walked.

``yaml.safe_load`` builds whatever the text describes. Two shapes of text make that, or the
walk every checker then does, never end: aliases that expand geometrically (a "billion
laughs": nine anchors each naming the last nine times is 387 million strings, from 400
bytes — ``caldera dry-run`` grew past 1.4 GB and ran for minutes) and an anchor that names
itself (``&a [*a]``, a list that contains itself, which any walk follows for ever). And a
document nested a few thousand levels deep overflows the parser's own recursion.

So each document is composed first (anchors stay shared nodes), its node graph is checked
— no node inside itself, at most :data:`MAX_VALUES` values once every alias is expanded —
and only then constructed. Kubernetes' YAML parser refuses excessive aliasing the same way.
The errors are :class:`yaml.YAMLError`, so a caller's "invalid YAML" line covers them.
"""

from __future__ import annotations

import yaml
from yaml.nodes import MappingNode, Node, SequenceNode

MAX_VALUES = 1_000_000  # values in one document, every alias expanded


class HostileYaml(yaml.YAMLError):
    """A document refused before it is built (its aliases, a cycle, its depth)."""


def load_all(text: str) -> list[object]:
    """Every document of ``text`` (None for an empty one), each checked before it is built."""
    loader = yaml.SafeLoader(text)
    try:
        documents: list[object] = []
        index = 0
        while loader.check_node():
            node = loader.get_node()
            if node is None:  # an empty document
                documents.append(None)
                index += 1
                continue
            _check(node, index)
            documents.append(loader.construct_document(node))
            index += 1
        return documents
    except RecursionError:
        raise HostileYaml("nested too deeply (more than a few hundred levels)") from None
    finally:
        loader.dispose()


def load(text: str) -> object:
    """The one document of ``text`` (None when empty), checked before it is built."""
    documents = load_all(text)
    if len(documents) > 1:
        raise HostileYaml(f"expected one document, found {len(documents)}")
    return documents[0] if documents else None


def _children(node: Node) -> list[Node]:
    if isinstance(node, SequenceNode):
        return list(node.value)
    if isinstance(node, MappingNode):
        return [n for pair in node.value for n in pair]
    return []


def _check(root: Node, index: int) -> None:
    """Refuse a node inside itself and more than MAX_VALUES values after expansion (iteratively:
    the graph may be deep)."""
    size: dict[int, int] = {}
    open_: set[int] = set()
    stack: list[tuple[Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        if done:
            open_.discard(key)
            total = 1 + sum(size[id(c)] for c in _children(node))
            if total > MAX_VALUES:
                raise HostileYaml(
                    f"document {index}: its aliases expand to more than {MAX_VALUES:,} values "
                    "(a 'billion laughs' document?)"
                )
            size[key] = total
            continue
        if key in size:
            continue
        if key in open_:
            raise HostileYaml(f"document {index}: an alias refers to a value that contains it (a cycle)")
        open_.add(key)
        stack.append((node, True))
        stack.extend((c, False) for c in _children(node) if id(c) not in size)
