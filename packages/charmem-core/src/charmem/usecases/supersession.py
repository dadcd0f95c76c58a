"""Whether a plan's ``supersedes`` lists may be written: no cycle, no second successor.

Two rules of supersession, checked against the plan and the stored ``supersedes`` links
(:func:`~charmem.domain.rules.supersession_cycles`,
:func:`~charmem.domain.rules.conflicting_successors`). Plan validation
(:func:`charmem.usecases.validation.validate`) adds the reasons to the successors.
"""

from __future__ import annotations

from collections.abc import Sequence

from charmem.domain.ids import ID_ORDER, MemoryId
from charmem.domain.model import DerivedMemory, MemoryObject, Relation
from charmem.domain.rules import conflicting_successors, supersession_cycles
from charmem.ports import GraphStore

__all__ = ["check_supersession"]

#: ``(successor, predecessor)``: ``successor`` supersedes ``predecessor``.
Edge = tuple[MemoryId, MemoryId]


async def check_supersession(objects: Sequence[MemoryObject], graph: GraphStore) -> dict[MemoryId, list[str]]:
    """Why the plan's ``supersedes`` lists are refused, by the derived memory holding them.

    Two rules (:func:`~charmem.domain.rules.supersession_cycles`,
    :func:`~charmem.domain.rules.conflicting_successors`): the plan's supersedes links may not
    close a cycle, among its drafts or with stored links; and a memory that another memory already
    supersedes gains no new successor (a replay, whose links are all stored, stays accepted; a
    split into several successors within the plan and a merge are allowed). A draft superseding
    itself is left to the per-candidate check.

    Args:
        objects: the plan's objects.
        graph: the graph authority (read only; one ``links_of`` call, more only when a stored
            ``supersedes`` link points at one of the plan's successors).

    Returns:
        dict[MemoryId, list[str]]: successor id -> reasons; empty when the plan is fine.

    Raises:
        BackendError: the graph could not be read.
    """
    written = _written(objects)
    if not written:
        return {}
    successors = {s for group in written.values() for s in group}
    touched = sorted({*written, *successors}, key=ID_ORDER)
    links = await graph.links_of(touched, relations=[Relation.SUPERSEDES])
    stored = {(link.from_id, link.to_id) for link in links}
    reasons = _second_successors(written, stored)
    new = {(s, p) for p, group in written.items() for s in group} - stored
    edges = stored | new
    if any(p in successors for _, p in stored):
        edges |= await _supersession_component(graph, touched)
    _cycles(edges, new, reasons)
    return reasons


def _written(objects: Sequence[MemoryObject]) -> dict[MemoryId, set[MemoryId]]:
    """Superseded memory -> the plan's memories superseding it (self-supersession left out)."""
    written: dict[MemoryId, set[MemoryId]] = {}
    for obj in objects:
        if isinstance(obj, DerivedMemory):
            for target in obj.supersedes:
                if target != obj.id:
                    written.setdefault(target, set()).add(obj.id)
    return written


def _second_successors(
    written: dict[MemoryId, set[MemoryId]], stored: set[Edge]
) -> dict[MemoryId, list[str]]:
    """Reasons for successors of memories another memory already supersedes, by successor."""
    reasons: dict[MemoryId, list[str]] = {}
    for target in sorted(written, key=ID_ORDER):
        current = {s for s, p in stored if p == target}
        blocking = conflicting_successors(current, written[target])
        for successor in sorted(written[target] - current, key=ID_ORDER) if blocking else ():
            reasons.setdefault(successor, []).append(
                f"superseded memory {target} is already superseded by {', '.join(map(str, blocking))}; "
                f"a memory gains successors in one plan only: supersede {blocking[0]} (or the belief "
                "that now replaces it) instead"
            )
    return reasons


def _cycles(edges: set[Edge], new: set[Edge], reasons: dict[MemoryId, list[str]]) -> None:
    """Add a reason to each new link's successor on a cycle the new links close."""
    for cycle in supersession_cycles(edges):
        pairs = list(zip(cycle, (*cycle[1:], cycle[0]), strict=True))
        if len(cycle) < 2 or new.isdisjoint(pairs):
            continue
        named = " supersedes ".join(map(str, (*cycle, cycle[0])))
        for successor, predecessor in pairs:
            if (successor, predecessor) in new:
                reasons.setdefault(successor, []).append(
                    f"supersession cycle: {named}; supersedes links must not form a cycle (drop one of "
                    "these supersedes entries)"
                )


async def _supersession_component(graph: GraphStore, start: Sequence[MemoryId]) -> set[Edge]:
    """Every stored supersedes link connected to ``start`` (either direction), as pairs."""
    seen = set(start)
    frontier = list(start)
    edges: set[Edge] = set()
    while frontier:
        reached: set[MemoryId] = set()
        for link in await graph.links_of(frontier, relations=[Relation.SUPERSEDES]):
            edges.add((link.from_id, link.to_id))
            reached.update(end for end in (link.from_id, link.to_id) if end not in seen)
        seen |= reached
        frontier = sorted(reached, key=ID_ORDER)
    return edges
