"""Signs of a half-written graph batch, found by :func:`~charmem.admin.check` (pure functions).

A batch (a plan's objects, its caller and derived links, or a lifecycle operation's replacement,
links and records) is written in one transaction by the embedded Oxigraph store and in one SPARQL
update by the service store, so none should ever be found. Signs of one: links whose endpoints
are not stored, objects naming ids that are not stored, objects without the links commit derives
from them, corrections whose replacement is missing or does not supersede the target, and
cascaded suppressions without the record of their origin. They are not repaired by rebuilding:
replay the plan or operation that wrote the batch (replays are idempotent).

``purged`` ids (tombstones of :func:`charmem.admin.purge`) are known, not missing: references to
them are expected, the links derived towards them were erased on purpose, a kept ``supersedes``
link may start at one, and a suppression cascaded from one keeps no origin record (it was erased
with the purged memory).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet

from charmem.admin._report import GraphProblem, GraphProblemKind
from charmem.domain.graph import LifecycleAction, LifecycleRecord
from charmem.domain.ids import MemoryId
from charmem.domain.model import MemoryLink, MemoryObject, Relation
from charmem.usecases.planning import derive_links
from charmem.usecases.validation import object_references

__all__ = ["partial_batch_problems"]

#: A link as a statement: (from_id, relation, to_id).
_Statement = tuple[MemoryId, Relation, MemoryId]


def _problem(
    kind: GraphProblemKind, memory_id: MemoryId, detail: str, related: Iterable[MemoryId]
) -> GraphProblem:
    return GraphProblem(kind=kind, id=memory_id, detail=detail, related_ids=related)


def partial_batch_problems(
    collection: str,
    stored: set[MemoryId],
    objects: Mapping[MemoryId, MemoryObject],
    links: Mapping[MemoryId, MemoryLink],
    records: Sequence[LifecycleRecord],
    purged: AbstractSet[MemoryId] = frozenset(),
) -> list[GraphProblem]:
    """The partial-batch signs among readable objects, links and records (see the module).

    Args:
        collection: the collection (derived link ids are namespaced by it).
        stored: every stored object id, readable or not.
        objects: the readable objects by id.
        links: the readable links by id.
        records: the lifecycle records about the stored objects.
        purged: ids of tombstones.

    Returns:
        list[GraphProblem]: link problems first, then object problems, then record problems.
    """
    stated = {(link.from_id, link.relation, link.to_id) for link in links.values()}
    known = stored | purged
    return [
        *_dangling_links(links.values(), known),
        *_object_problems(collection, objects.values(), stated, known, purged),
        *_record_problems(records, stated, stored, purged),
    ]


def _dangling_links(links: Iterable[MemoryLink], known: AbstractSet[MemoryId]) -> list[GraphProblem]:
    """Links whose ``from_id`` or ``to_id`` is neither stored nor purged."""
    problems = []
    for link in links:
        absent = [end for end in (link.from_id, link.to_id) if end not in known]
        if absent:
            problems.append(
                _problem(
                    GraphProblemKind.DANGLING_LINK,
                    link.id,
                    f"{link.relation.value} link {link.from_id} -> {link.to_id} joins {len(absent)} "
                    "id(s) that are not stored objects",
                    absent,
                )
            )
    return problems


def _object_problems(
    collection: str,
    objects: Iterable[MemoryObject],
    stated: AbstractSet[_Statement],
    known: AbstractSet[MemoryId],
    purged: AbstractSet[MemoryId],
) -> list[GraphProblem]:
    """Objects naming ids that are not known, and objects lacking a link commit derives."""
    problems = []
    for obj in objects:
        absent = sorted(object_references(obj) - known)
        if absent:
            problems.append(
                _problem(
                    GraphProblemKind.MISSING_REFERENCE,
                    obj.id,
                    f"the {obj.object_type.value} names {len(absent)} id(s) that are not stored",
                    absent,
                )
            )
        lacking = [
            link
            for link in derive_links(collection, [obj])
            if (link.from_id, link.relation, link.to_id) not in stated
            and link.from_id not in purged
            and link.to_id not in purged
        ]
        if lacking:
            described = ", ".join(f"{link.relation.value} {link.from_id} -> {link.to_id}" for link in lacking)
            problems.append(
                _problem(
                    GraphProblemKind.MISSING_DERIVED_LINK,
                    obj.id,
                    f"the {obj.object_type.value} lacks derived link(s): {described}",
                    [end for link in lacking for end in (link.from_id, link.to_id)],
                )
            )
    return problems


def _record_problems(
    records: Sequence[LifecycleRecord],
    stated: AbstractSet[_Statement],
    stored: AbstractSet[MemoryId],
    purged: AbstractSet[MemoryId],
) -> list[GraphProblem]:
    """Records naming unknown ids, broken corrections and cascades without their origin."""
    known = stored | purged
    origins = {(r.target_id, r.rationale) for r in records if not r.related_ids}
    problems = []
    for record in records:
        absent = sorted(set(record.related_ids) - known)
        if absent:
            problems.append(
                _problem(
                    GraphProblemKind.MISSING_REFERENCE,
                    record.id,
                    f"the {record.action.value} record about {record.target_id} names {len(absent)} "
                    "id(s) that are not stored",
                    absent,
                )
            )
        if record.action is LifecycleAction.CORRECT:
            problems += _broken_correction(record, stated, stored)
        elif record.related_ids and not any(
            (origin, record.rationale) in origins or origin in purged for origin in record.related_ids
        ):
            problems.append(
                _problem(
                    GraphProblemKind.ORPHAN_CASCADE,
                    record.id,
                    f"the {record.action.value} of {record.target_id} cascaded from "
                    f"{', '.join(map(str, record.related_ids))}, which has no record of that forget",
                    record.related_ids,
                )
            )
    return problems


def _broken_correction(
    record: LifecycleRecord, stated: AbstractSet[_Statement], stored: AbstractSet[MemoryId]
) -> list[GraphProblem]:
    """A ``correct`` record whose stored replacements do not supersede its target."""
    unsuperseding = [
        i
        for i in record.related_ids
        if i in stored and (i, Relation.SUPERSEDES, record.target_id) not in stated
    ]
    if not unsuperseding:
        return []
    return [
        _problem(
            GraphProblemKind.BROKEN_CORRECTION,
            record.id,
            f"the correction of {record.target_id} names replacement(s) with no supersedes link to it",
            unsuperseding,
        )
    ]
