"""Stored breaches of rules the write path enforces, found by :func:`~charmem.admin.check` (pure).

The write path refuses a cycle of ``supersedes`` links, a memory superseded by more than one
write and a memory dated before what it depends on; stores written before those rules, imports
or direct graph writes may still hold them. Forgets of episodes recorded before forgetting an
episode reached its observations are history of an earlier version, the one kind
:func:`~charmem.admin.repair` completes (:mod:`charmem.usecases.forgetting`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC

from charmem.admin._report import GraphProblem, GraphProblemKind
from charmem.domain.graph import LifecycleAction, LifecycleRecord
from charmem.domain.ids import ID_ORDER, MemoryId
from charmem.domain.model import MemoryLink, MemoryObject, Relation
from charmem.domain.rules import derived_link_id, supersession_cycles, time_order_breach
from charmem.usecases.forgetting import collection_forget_gaps
from charmem.usecases.validation import time_order_dependencies

__all__ = ["episode_forget_problems", "supersession_problems", "time_order_problems"]


def supersession_problems(
    links: Iterable[MemoryLink], records: Sequence[LifecycleRecord]
) -> list[GraphProblem]:
    """Stored breaches of the supersession rules: cycles, then second successors.

    Cycles are exact: :func:`~charmem.domain.rules.supersession_cycles` over every stored
    ``supersedes`` link, one problem per cycle, under its smallest id.

    Second successors: the graph keeps no trace of which write stored a link, so "superseded by
    memories from more than one plan" is decided from what each write leaves. A correction writes
    exactly one successor, named by its ``correct`` record on the target; a plan writes its
    ``supersedes`` links with its successors' ``created_at``, which a prepared plan fills from one
    clock reading. A memory with several successors is reported when one of them is a
    correction's replacement, or when their ``supersedes`` links carry different ``created_at``
    instants. A split written by one plan whose drafts were given different ``created_at`` values
    is therefore reported too (it cannot be told apart), and two plans that gave their successors
    the same instant are not.
    """
    supersedes = [link for link in links if link.relation is Relation.SUPERSEDES]
    return [*_supersession_cycles(supersedes), *_second_successors(supersedes, records)]


def _supersession_cycles(supersedes: Sequence[MemoryLink]) -> list[GraphProblem]:
    return [
        GraphProblem(
            kind=GraphProblemKind.SUPERSESSION_CYCLE,
            id=cycle[0],
            detail=f"supersedes links form a cycle ({' supersedes '.join(map(str, (*cycle, cycle[0])))}): "
            "none of these memories is current, and retrieval never reaches them; remember the right "
            "belief anew",
            related_ids=cycle,
        )
        for cycle in supersession_cycles((link.from_id, link.to_id) for link in supersedes)
    ]


def _second_successors(
    supersedes: Sequence[MemoryLink], records: Sequence[LifecycleRecord]
) -> list[GraphProblem]:
    incoming: dict[MemoryId, list[MemoryLink]] = {}
    for link in supersedes:
        if link.from_id != link.to_id:
            incoming.setdefault(link.to_id, []).append(link)
    corrected = {
        (record.target_id, replacement)
        for record in records
        if record.action is LifecycleAction.CORRECT
        for replacement in record.related_ids
    }
    problems = []
    for target, arriving in sorted(incoming.items(), key=lambda item: ID_ORDER(item[0])):
        successors = {link.from_id for link in arriving}
        why = _why_second_successor(target, arriving, successors, corrected) if len(successors) > 1 else None
        if why is None:
            continue
        problems.append(
            GraphProblem(
                kind=GraphProblemKind.SECOND_SUCCESSOR,
                id=target,
                detail=f"superseded by {len(successors)} memories that more than one write added ({why}); "
                "a memory gains successors in one plan or correction only",
                related_ids=successors,
            )
        )
    return problems


def _why_second_successor(
    target: MemoryId,
    arriving: Sequence[MemoryLink],
    successors: set[MemoryId],
    corrected: set[tuple[MemoryId, MemoryId]],
) -> str | None:
    """Why several successors of ``target`` came from more than one write, or ``None``."""
    by_correction = sorted((s for s in successors if (target, s) in corrected), key=ID_ORDER)
    instants = {link.created_at.astimezone(UTC) for link in arriving}
    if by_correction:
        return f"{by_correction[0]} is a correction's replacement, and a correction writes one successor"
    if len(instants) > 1:
        return f"their supersedes links were written at {len(instants)} different instants"
    return None


def time_order_problems(
    collection: str, objects: Mapping[MemoryId, MemoryObject], links: Mapping[MemoryId, MemoryLink]
) -> list[GraphProblem]:
    """Stored objects and caller links dated before what they depend on.

    Derived links carry their source object's ``created_at`` and are judged through it (a derived
    memory's ``supersedes`` and ``derived_from``, an observation's ``has_observation``); a link is
    caller-authored when its id is not the derived one.
    """
    problems = []
    caller_links = [
        link
        for link in links.values()
        if link.id != derived_link_id(collection, link.from_id, link.relation, link.to_id)
    ]
    for item in [*objects.values(), *caller_links]:
        depends = time_order_dependencies(item)
        earlier = {i: objects[i].created_at for i in depends if i in objects}
        breach = time_order_breach(item.created_at, earlier=earlier)
        if breach is None or breach.earlier_id is None:
            continue
        kind = (
            "link"
            if isinstance(item, MemoryLink)
            else item.object_type.value.replace("derived", "derived memory")
        )
        late = sorted((i for i, at in earlier.items() if item.created_at < at), key=ID_ORDER)
        problems.append(
            GraphProblem(
                kind=GraphProblemKind.OUT_OF_TIME_ORDER,
                id=item.id,
                detail=f"the {kind} is dated {item.created_at.isoformat()}, before its "
                f"{depends[breach.earlier_id]} {breach.earlier_id} was created "
                f"({breach.bound.isoformat()}): an as_of view between the two shows it without what "
                "it depends on; written before the write path refused this, by an import or a direct "
                "graph write",
                related_ids=late,
            )
        )
    return problems


def episode_forget_problems(
    collection: str,
    objects: Mapping[MemoryId, MemoryObject],
    links: Mapping[MemoryId, MemoryLink],
    records: Sequence[LifecycleRecord],
) -> list[GraphProblem]:
    """Forgotten episodes whose forget lacks suppressions (:func:`collection_forget_gaps`)."""
    return [
        GraphProblem(
            kind=GraphProblemKind.EPISODE_PARTS_NOT_FORGOTTEN,
            id=episode_id,
            detail=f"the episode was forgotten at {gaps[0].recorded_at.isoformat()}, but {len(gaps)} of "
            "its observation(s) or the memories grounded on them are still current (forgotten before "
            "forgetting an episode reached its parts)",
            related_ids=[record.target_id for record in gaps],
        )
        for episode_id, gaps in collection_forget_gaps(collection, objects, links.values(), records).items()
    ]
