"""``validate_plan``: check a plan against itself and the graph, read-only (spec "Write path")."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime

from charmem.domain.graph import Tombstone
from charmem.domain.ids import ID_ORDER, MemoryId
from charmem.domain.model import (
    DerivedMemory,
    Episode,
    MemoryLink,
    MemoryObject,
    ObjectType,
    Observation,
    Relation,
    object_type_of,
)
from charmem.domain.plan import CandidateValidation, CandidateValidationStatus, RememberWritePlan
from charmem.domain.rules import (
    RECORDED_AT_SKEW,
    conflicting_successors,
    content_equal,
    supersession_cycles,
    time_order_breach,
)
from charmem.domain.serde import unstructure_item
from charmem.errors import IdConflictError, LifecycleErrorKind, PlanValidationError, PurgedMemoryError
from charmem.ports import GraphStore
from charmem.usecases.planning import derive_links, index_entries

__all__ = [
    "CONFLICT_PREFIX",
    "PURGED_PREFIX",
    "TIME_ORDER_PREFIX",
    "check_supersession",
    "object_references",
    "raise_for_invalid",
    "time_order_dependencies",
    "time_order_reason",
    "validate",
    "validate_against_graph",
]

#: Reasons that start with this prefix are id conflicts (commit raises ``IdConflictError``).
CONFLICT_PREFIX = "id conflict"
#: Reasons that start with this prefix name purged memories (commit raises ``PurgedMemoryError``).
PURGED_PREFIX = "purged"
#: Reasons that start with this prefix break time order (:func:`time_order_reason`).
TIME_ORDER_PREFIX = "time order"

_E, _O, _N, _T, _D = (
    ObjectType.EPISODE,
    ObjectType.OBSERVATION,
    ObjectType.ENTITY,
    ObjectType.THREAD,
    ObjectType.DERIVED,
)
_ANY = frozenset(ObjectType)

#: Endpoint types each relation allows (DESIGN §3 table).
ENDPOINTS: dict[Relation, tuple[frozenset[ObjectType], frozenset[ObjectType]]] = {
    Relation.HAS_OBSERVATION: (frozenset({_E}), frozenset({_O})),
    Relation.INVOLVES: (frozenset({_E}), frozenset({_N})),
    Relation.MENTIONS: (frozenset({_O}), frozenset({_N})),
    Relation.DERIVED_FROM: (frozenset({_D}), frozenset({_E, _O})),
    Relation.ABOUT: (frozenset({_D}), frozenset({_N})),
    Relation.PART_OF_THREAD: (frozenset({_E, _D}), frozenset({_T})),
    Relation.SUPERSEDES: (frozenset({_D}), _ANY - {_N, _T}),
}


def _kind(item: MemoryObject | MemoryLink) -> str:
    return "link" if isinstance(item, MemoryLink) else object_type_of(item).value


async def validate(
    plan: RememberWritePlan, graph: GraphStore, now: datetime | None = None
) -> list[CandidateValidation]:
    """Validate every candidate of ``plan`` against the plan itself and the stored graph.

    Checks: ids unique across the plan and the store unless the content is equal; no candidate
    is a purged memory and no new candidate refers to one (tombstones, ``charmem.admin.purge``);
    every referenced id resolves to an object of the right type; derived memories are grounded or
    given (given ones need a notion subject and no sources); assertions name a subject in
    ``entity_ids``; supersession stays acyclic and a memory another memory already supersedes
    gains no successor from this plan (:func:`check_supersession`); caller links are not
    ``supersedes``, join two objects and fit the relation's endpoint types; the derived links
    match the objects; every candidate not already stored is in time order
    (:func:`time_order_reason`): not dated beyond the clock's skew after ``now``, and not before
    what it depends on was created, whether that is planned or stored.

    Args:
        plan: the plan to check.
        graph: the graph authority (read only).
        now: the clock's now; ``None`` skips the check against the clock's future (the ordering
            between memories is checked either way).

    Returns:
        list[CandidateValidation]: one per object, then one per caller link, in plan order.

    Raises:
        BackendError: the graph could not be read.
    """
    validations, _tombstones, _derived = await validate_against_graph(plan, graph, now)
    return validations


async def validate_against_graph(
    plan: RememberWritePlan, graph: GraphStore, now: datetime | None = None
) -> tuple[list[CandidateValidation], dict[MemoryId, Tombstone], tuple[MemoryLink, ...]]:
    """:func:`validate`, also returning tombstones and derived links.

    The tombstones are those among the ids the plan names; the derived links are those its
    objects imply. Commit uses the tombstones to leave out derived links to purged memories when an
    already-stored memory that refers to one is replayed (its equal content is accepted; the link
    stays erased), and writes the derived links computed here (not computed twice).

    Args:
        plan: the plan to check.
        graph: the graph authority (read only).
        now: the clock's now, as :func:`validate`.

    Returns:
        tuple: the validations (as :func:`validate`), the tombstones by id, and
        ``derive_links(plan.collection, plan.objects, plan.links)``.

    Raises:
        BackendError: the graph could not be read.
    """
    candidates: list[MemoryObject | MemoryLink] = [*plan.objects, *plan.links]
    reasons: dict[int, list[str]] = {i: [] for i in range(len(candidates))}
    warnings: dict[int, list[str]] = {i: [] for i in range(len(candidates))}

    in_plan: dict[MemoryId, MemoryObject] = {}
    first_seen: dict[MemoryId, MemoryObject | MemoryLink] = {}
    for index, item in enumerate(candidates):
        earlier = first_seen.get(item.id)
        if earlier is None:
            first_seen[item.id] = item
        elif type(earlier) is not type(item) or not content_equal(earlier, item):
            reasons[index].append(f"{CONFLICT_PREFIX}: the plan holds this id twice with different content")
        if not isinstance(item, MemoryLink):
            in_plan.setdefault(item.id, item)

    referenced: set[MemoryId] = set(first_seen)
    for obj in plan.objects:
        referenced.update(object_references(obj))
    for link in plan.links:
        referenced.update((link.from_id, link.to_id))
    derived_links = derive_links(plan.collection, plan.objects, plan.links)
    stored = await graph.get_objects(sorted(referenced, key=ID_ORDER))
    stored_links = await graph.get_links(sorted({*first_seen, *(d.id for d in derived_links)}, key=ID_ORDER))
    # A purged id has no object: only ids not stored as objects can be tombstones.
    tombstones = await graph.tombstones(sorted(referenced - stored.keys(), key=ID_ORDER))
    replayed: set[int] = set()

    def type_of(memory_id: MemoryId) -> ObjectType | None:
        obj = in_plan.get(memory_id) or stored.get(memory_id)
        if obj is None:
            tombstone = tombstones.get(memory_id)
            return None if tombstone is None else tombstone.object_type
        return object_type_of(obj)

    def purged_reference(index: int, memory_id: MemoryId, what: str) -> None:
        tombstone = tombstones.get(memory_id)
        if tombstone is not None and index not in replayed:
            reasons[index].append(
                f"{PURGED_PREFIX}: {what} {memory_id} was purged at {tombstone.purged_at.isoformat()}; "
                "a new memory cannot refer to it (leave it out)"
            )

    def require(index: int, ids: Sequence[MemoryId], allowed: frozenset[ObjectType], what: str) -> None:
        for memory_id in ids:
            purged_reference(index, memory_id, what)
            found = type_of(memory_id)
            if found is None:
                reasons[index].append(f"{what} {memory_id} is neither in the plan nor stored")
            elif found not in allowed:
                names = "/".join(sorted(t.value for t in allowed))
                reasons[index].append(f"{what} {memory_id} is {_article(found.value)}, not {_article(names)}")

    for index, item in enumerate(candidates):
        previous = stored.get(item.id) or stored_links.get(item.id)
        purged = tombstones.get(item.id)
        if purged is not None:
            reasons[index].append(
                f"{PURGED_PREFIX}: {purged.object_type.value} {item.id} was purged at "
                f"{purged.purged_at.isoformat()} and can never be written again (drop it from the plan)"
            )
        elif previous is not None:
            if type(previous) is type(item) and content_equal(previous, item):
                warnings[index].append("already stored with equal content (replay)")
                replayed.add(index)
            else:
                reasons[index].append(f"{CONFLICT_PREFIX}: {_conflict_detail(previous, item)}")
        if isinstance(item, Episode):
            require(index, item.participant_entity_ids, frozenset({_N}), "participant")
            require(index, item.thread_ids, frozenset({_T}), "thread")
        elif isinstance(item, Observation):
            require(index, [item.episode_id], frozenset({_E}), "episode")
            if item.speaker_entity_id is not None:
                require(index, [item.speaker_entity_id], frozenset({_N}), "speaker")
            require(index, item.mentioned_entity_ids, frozenset({_N}), "mentioned notion")
        elif isinstance(item, DerivedMemory):
            _check_derived(item, reasons[index])
            require(index, item.episode_ids, frozenset({_E}), "source episode")
            require(index, item.observation_ids, frozenset({_O}), "source observation")
            require(index, item.entity_ids, frozenset({_N}), "subject")
            require(index, item.thread_ids, frozenset({_T}), "thread")
            require(index, item.supersedes, frozenset({_D}), "superseded memory")
        elif isinstance(item, MemoryLink):
            for end, memory_id in (("link source", item.from_id), ("link target", item.to_id)):
                purged_reference(index, memory_id, end)
            _check_link(item, type_of, reasons[index])
        if index not in replayed:
            # A replay is stored already: it was in order when written (check reports it if not).
            created = {
                memory_id: depended.created_at
                for memory_id in time_order_dependencies(item)
                if (depended := in_plan.get(memory_id) or stored.get(memory_id)) is not None
            }
            out_of_order = time_order_reason(item, created, now)
            if out_of_order is not None:
                reasons[index].append(out_of_order)

    supersession = await check_supersession(plan.objects, graph)
    if supersession:
        first_index = {c.id: i for i, c in reversed(list(enumerate(candidates)))}
        for successor_id, why in supersession.items():
            reasons[first_index[successor_id]].extend(why)

    plan_derived = {link.id: link for link in plan.derived_links}
    expected = {link.id: link for link in derived_links}
    # Equal links (``==``: same ids, relation, rationale, instants) have equal content; only a
    # plan whose derived links differ from the recomputed ones needs the canonical comparison.
    mismatch = tuple(plan.derived_links) != derived_links and (
        set(plan_derived) != set(expected)
        or any(not content_equal(plan_derived[i], expected[i]) for i in expected)
    )
    for link in derived_links:
        previous = stored.get(link.id) or stored_links.get(link.id)
        if previous is not None and not (isinstance(previous, MemoryLink) and content_equal(previous, link)):
            mismatch = True
            owner = next((i for i, c in enumerate(candidates) if c.id in (link.from_id, link.to_id)), 0)
            reasons[owner].append(
                f"{CONFLICT_PREFIX}: derived {link.relation.value} link {link.id} is already stored "
                "with different content"
            )
    if mismatch and plan.objects and not any(reasons.values()):
        reasons[0].append("the plan's derived links do not match its objects; re-prepare the plan")
    if tuple(plan.index_entries) != index_entries(plan.objects) and plan.objects and not reasons[0]:
        reasons[0].append("the plan's index entries do not match its objects; re-prepare the plan")

    validations = [
        CandidateValidation(
            candidate_id=item.id,
            kind=_kind(item),
            status=CandidateValidationStatus.INVALID if reasons[i] else CandidateValidationStatus.VALID,
            reasons=tuple(reasons[i]),
            warnings=tuple(warnings[i]),
        )
        for i, item in enumerate(candidates)
    ]
    return validations, tombstones, derived_links


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
    written: dict[MemoryId, set[MemoryId]] = {}
    for obj in objects:
        if isinstance(obj, DerivedMemory):
            for target in obj.supersedes:
                if target != obj.id:
                    written.setdefault(target, set()).add(obj.id)
    if not written:
        return {}
    successors = {s for group in written.values() for s in group}
    touched = sorted({*written, *successors}, key=ID_ORDER)
    links = await graph.links_of(touched, relations=[Relation.SUPERSEDES])
    stored = {(link.from_id, link.to_id) for link in links}
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
    new = {(s, p) for p, group in written.items() for s in group} - stored
    edges = stored | new
    if any(p in successors for _, p in stored):
        edges |= await _supersession_component(graph, touched)
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
    return reasons


async def _supersession_component(
    graph: GraphStore, start: Sequence[MemoryId]
) -> set[tuple[MemoryId, MemoryId]]:
    """Every stored supersedes link connected to ``start`` (either direction), as pairs."""
    seen = set(start)
    frontier = list(start)
    edges: set[tuple[MemoryId, MemoryId]] = set()
    while frontier:
        reached: set[MemoryId] = set()
        for link in await graph.links_of(frontier, relations=[Relation.SUPERSEDES]):
            edges.add((link.from_id, link.to_id))
            reached.update(end for end in (link.from_id, link.to_id) if end not in seen)
        seen |= reached
        frontier = sorted(reached, key=ID_ORDER)
    return edges


def raise_for_invalid(validations: Sequence[CandidateValidation], *, what: str = "candidate") -> None:
    """Raise the typed error for the invalid candidates among ``validations`` (none: return).

    Purged memories first, then id conflicts, then any other reason.

    Args:
        validations: from :func:`validate`.
        what: how the message names a candidate (``"candidate"``, ``"link"``).

    Raises:
        PurgedMemoryError: a candidate is, or newly refers to, a purged memory.
        IdConflictError: an id is stored with different content.
        PlanValidationError: any other invalid candidate.
    """
    invalid = {
        str(v.candidate_id): v.reasons for v in validations if v.status is CandidateValidationStatus.INVALID
    }
    if not invalid:
        return

    def having(prefix: str) -> list[str]:
        return sorted(key for key, reasons in invalid.items() if any(r.startswith(prefix) for r in reasons))

    purged, conflicts = having(PURGED_PREFIX), having(CONFLICT_PREFIX)
    if purged:
        example = next(r for r in invalid[purged[0]] if r.startswith(PURGED_PREFIX))
        raise PurgedMemoryError(
            f"{len(purged)} {what}(s) are or refer to purged memories, e.g. {purged[0]}: {example}; "
            "nothing was written",
            ids=purged,
            reasons=invalid,
        )
    if conflicts:
        raise IdConflictError(
            f"{len(conflicts)} id(s) are already stored or planned with different content, e.g. "
            f"{conflicts[0]}: {invalid[conflicts[0]][0]}; nothing was written",
            ids=conflicts,
            reasons=invalid,
        )
    first = next(iter(invalid.items()))
    raise PlanValidationError(
        f"{len(invalid)} {what}(s) are invalid, e.g. {first[0]}: {first[1][0]}; nothing was written",
        reasons=invalid,
    )


def _article(word: str) -> str:
    return f"an {word}" if word[:1] in "aeiou" else f"a {word}"


def _conflict_detail(stored: MemoryObject | MemoryLink, new: MemoryObject | MemoryLink) -> str:
    """Why an id conflicts: another kind, or the fields whose content differs."""
    if type(stored) is not type(new):
        return f"id already stored as {_article(_kind(stored))}, not {_article(_kind(new))}"
    old = unstructure_item(stored, canonical=True)
    fresh = unstructure_item(new, canonical=True)
    fields = sorted(key for key in old.keys() | fresh.keys() if old.get(key) != fresh.get(key))
    hint = ""
    if "created_at" in fields:
        hint = " (created_at defaults to the clock: pass created_at, or keep and replay the plan)"
    return f"id already stored as {_article(_kind(stored))} with different {', '.join(fields)}{hint}"


def object_references(obj: MemoryObject) -> set[MemoryId]:
    """Every id a stored object names (sources, subjects, threads, episode, speaker, superseded)."""
    if isinstance(obj, Episode):
        return {*obj.participant_entity_ids, *obj.thread_ids}
    if isinstance(obj, Observation):
        refs = {obj.episode_id, *obj.mentioned_entity_ids}
        if obj.speaker_entity_id is not None:
            refs.add(obj.speaker_entity_id)
        return refs
    if isinstance(obj, DerivedMemory):
        return {*obj.source_ids, *obj.entity_ids, *obj.thread_ids, *obj.supersedes}
    return set()


def time_order_dependencies(item: MemoryObject | MemoryLink) -> dict[MemoryId, str]:
    """What an object or link may not predate, by id, with how a message names each.

    An observation its episode; a derived memory its source episodes and observations and the
    memories it supersedes; a link its endpoints. Notions and threads are referred to, not
    depended on: an episode may name a person first known later.

    Returns:
        dict[MemoryId, str]: id -> role (``"episode"``, ``"source episode"``, ...); an id with
        several roles keeps the first.
    """
    roles: list[tuple[str, Sequence[MemoryId]]]
    if isinstance(item, Observation):
        roles = [("episode", [item.episode_id])]
    elif isinstance(item, DerivedMemory):
        roles = [
            ("source episode", item.episode_ids),
            ("source observation", item.observation_ids),
            ("superseded memory", [i for i in item.supersedes if i != item.id]),
        ]
    elif isinstance(item, MemoryLink):
        roles = [("link source", [item.from_id]), ("link target", [item.to_id])]
    else:
        roles = []
    depends: dict[MemoryId, str] = {}
    for role, ids in roles:
        for memory_id in ids:
            depends.setdefault(memory_id, role)
    return depends


def time_order_reason(
    item: MemoryObject | MemoryLink, earlier: dict[MemoryId, datetime], now: datetime | None
) -> str | None:
    """Why ``item`` breaks time order (:func:`~charmem.domain.rules.time_order_breach`), if it does.

    Args:
        item: a plan's object or caller link, dated by its ``created_at`` (a link draft's
            ``recorded_at``).
        earlier: the ``created_at`` of what it depends on (:func:`time_order_dependencies`),
            planned or stored, by id; unknown ids left out.
        now: the clock's now; ``None`` skips the future check.

    Returns:
        str | None: a reason starting with :data:`TIME_ORDER_PREFIX`, or ``None`` when in order.
    """
    breach = time_order_breach(item.created_at, earlier=earlier, now=now)
    if breach is None:
        return None
    kind = "derived memory" if isinstance(item, DerivedMemory) else _kind(item)
    field = "recorded_at" if isinstance(item, MemoryLink) else "created_at"
    at = item.created_at.isoformat()
    if breach.kind is LifecycleErrorKind.RECORDED_IN_FUTURE:
        assert now is not None
        return (
            f"{TIME_ORDER_PREFIX}: the {kind} is dated {at}, more than {RECORDED_AT_SKEW} after the "
            f"clock's now ({now.isoformat()}); a memory cannot be stored in the clock's future: pass a "
            f"{field} up to now, or leave it out"
        )
    assert breach.earlier_id is not None
    role = time_order_dependencies(item)[breach.earlier_id]
    created = breach.bound.isoformat()
    return (
        f"{TIME_ORDER_PREFIX}: the {kind} is dated {at}, before its {role} {breach.earlier_id} was "
        f"created ({created}); a {kind} cannot predate its {role}: pass a {field} at or after {created}"
    )


def _check_derived(item: DerivedMemory, reasons: list[str]) -> None:
    has_sources = bool(item.source_ids)
    if item.given_by_application:
        if has_sources:
            reasons.append(
                "given_by_application cannot coexist with source episodes or observations; "
                "drop the sources or the declaration"
            )
        if not item.entity_ids:
            reasons.append("given_by_application needs at least one notion in entity_ids")
    elif not has_sources:
        reasons.append(
            "a derived memory needs source episode_ids/observation_ids, or "
            "given_by_application=True with a notion subject"
        )
    subjects = set(item.entity_ids)
    for assertion in item.assertions:
        if assertion.subject not in subjects:
            reasons.append(f"invalid belief: assertion subject {assertion.subject} is not in entity_ids")
    if item.id in item.supersedes:
        reasons.append("a derived memory cannot supersede itself")


def _check_link(
    link: MemoryLink, type_of: Callable[[MemoryId], ObjectType | None], reasons: list[str]
) -> None:
    if link.relation is Relation.SUPERSEDES:
        reasons.append(
            "supersedes links are derived by commit and correct; author the derived memory's "
            "supersedes list instead"
        )
        return
    from_type, to_type = type_of(link.from_id), type_of(link.to_id)
    if from_type is None:
        reasons.append(f"link source {link.from_id} is not a stored or planned memory object")
    if to_type is None:
        reasons.append(f"link target {link.to_id} is not a stored or planned memory object")
    if link.from_id == link.to_id:
        reasons.append("a link cannot join an object to itself")
    bounds = ENDPOINTS.get(link.relation)
    if (
        bounds is not None
        and from_type is not None
        and to_type is not None
        and (from_type not in bounds[0] or to_type not in bounds[1])
    ):
        reasons.append(
            f"{link.relation.value} joins {'/'.join(sorted(t.value for t in bounds[0]))} to "
            f"{'/'.join(sorted(t.value for t in bounds[1]))}, not {from_type.value} to {to_type.value}"
        )
