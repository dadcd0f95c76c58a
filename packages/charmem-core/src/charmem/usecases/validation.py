"""``validate_plan``: check a plan against itself and the graph, read-only (docs/architecture.md)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Final

import attrs

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
from charmem.domain.plan import (
    CandidateValidation,
    CandidateValidationStatus,
    RememberWritePlan,
    ValidationWarning,
    WarningKind,
)
from charmem.domain.rules import (
    RECORDED_AT_SKEW,
    BeliefBreachKind,
    belief_breaches,
    content_equal,
    time_order_breach,
)
from charmem.domain.serde import unstructure_item
from charmem.domain.write_warnings import (
    observation_echo,
    repeated_scene_participant,
    resolver_without_common_ground,
)
from charmem.errors import (
    IdConflictError,
    LifecycleErrorKind,
    PlanValidationError,
    PurgedMemoryError,
    with_article,
)
from charmem.ports import GraphStore
from charmem.usecases.planning import derive_links, index_entries
from charmem.usecases.supersession import check_supersession

__all__ = [
    "CONFLICT_PREFIX",
    "PURGED_PREFIX",
    "TIME_ORDER_PREFIX",
    "check_supersession",
    "object_references",
    "raise_for_invalid",
    "refuse_other_collection",
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

#: Endpoint types each relation allows: (from types, to types).
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
    given (given ones need a notion subject and no sources); an episode's scene participants
    given by id are notions; assertions name a subject in ``entity_ids``; supersession stays
    acyclic and a memory another memory already supersedes gains no successor from this plan
    (:func:`check_supersession`); caller links are not
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
        PlanValidationError: the plan was prepared for another collection (commit refuses it
            the same way).
        BackendError: the graph could not be read.
    """
    validations, _tombstones, _derived = await validate_against_graph(plan, graph, now)
    return validations


def refuse_other_collection(plan: RememberWritePlan, collection: str) -> None:
    """A plan is validated and committed only in the collection it was prepared for.

    Its derived ids and links are namespaced by that collection, so its candidates mean nothing
    in another one.

    Raises:
        PlanValidationError: ``plan.collection`` is not ``collection``.
    """
    if plan.collection != collection:
        raise PlanValidationError(
            f"the plan was prepared for collection {plan.collection!r}, not {collection!r}; "
            "prepare it with this memory"
        )


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
        PlanValidationError: the plan was prepared for another collection.
        BackendError: the graph could not be read.
    """
    refuse_other_collection(plan, graph.collection)
    check = _PlanCheck(candidates=[*plan.objects, *plan.links], now=now)
    check.duplicates()
    derived_links = derive_links(plan.collection, plan.objects, plan.links)
    await check.read(plan, graph, derived_links)
    for index, item in enumerate(check.candidates):
        check.candidate(index, item)
    check.supersession(await check_supersession(plan.objects, graph))
    check.derived(plan, derived_links)
    return check.validations(), check.tombstones, derived_links


@attrs.define
class _PlanCheck:
    """The reasons and warnings of each candidate of a plan, gathered step by step.

    Candidates are the plan's objects then its caller links, by index; a replayed candidate is
    stored already with equal content.
    """

    candidates: list[MemoryObject | MemoryLink]
    now: datetime | None
    reasons: dict[int, list[str]] = attrs.field(init=False)
    warnings: dict[int, list[ValidationWarning]] = attrs.field(init=False)
    in_plan: dict[MemoryId, MemoryObject] = attrs.field(factory=dict, init=False)
    first_seen: dict[MemoryId, MemoryObject | MemoryLink] = attrs.field(factory=dict, init=False)
    stored: dict[MemoryId, MemoryObject] = attrs.field(factory=dict, init=False)
    stored_links: dict[MemoryId, MemoryLink] = attrs.field(factory=dict, init=False)
    tombstones: dict[MemoryId, Tombstone] = attrs.field(factory=dict, init=False)
    replayed: set[int] = attrs.field(factory=set, init=False)

    def __attrs_post_init__(self) -> None:
        self.reasons = {i: [] for i in range(len(self.candidates))}
        self.warnings = {i: [] for i in range(len(self.candidates))}

    def duplicates(self) -> None:
        """Ids are unique across the plan unless the content is equal."""
        for index, item in enumerate(self.candidates):
            earlier = self.first_seen.get(item.id)
            if earlier is None:
                self.first_seen[item.id] = item
            elif type(earlier) is not type(item) or not content_equal(earlier, item):
                self.reasons[index].append(
                    f"{CONFLICT_PREFIX}: the plan holds this id twice with different content"
                )
            if not isinstance(item, MemoryLink):
                self.in_plan.setdefault(item.id, item)

    async def read(self, plan: RememberWritePlan, graph: GraphStore, derived: Sequence[MemoryLink]) -> None:
        """Read the stored objects, links and tombstones of every id the plan names."""
        referenced: set[MemoryId] = set(self.first_seen)
        for obj in plan.objects:
            referenced.update(object_references(obj))
        for link in plan.links:
            referenced.update((link.from_id, link.to_id))
        self.stored = dict(await graph.get_objects(sorted(referenced, key=ID_ORDER)))
        # The episodes of observations a settling link joins: the warning compares them too.
        ends = (self.lookup(i) for link in plan.links for i in (link.from_id, link.to_id))
        episodes = {o.episode_id for o in ends if isinstance(o, Observation)} - referenced
        if episodes:
            self.stored.update(await graph.get_objects(sorted(episodes, key=ID_ORDER)))
        link_ids = sorted({*self.first_seen, *(d.id for d in derived)}, key=ID_ORDER)
        self.stored_links = dict(await graph.get_links(link_ids))
        # A purged id has no object: only ids not stored as objects can be tombstones.
        self.tombstones = dict(await graph.tombstones(sorted(referenced - self.stored.keys(), key=ID_ORDER)))

    def type_of(self, memory_id: MemoryId) -> ObjectType | None:
        """The type of a planned, stored or purged object (``None``: unknown)."""
        obj = self.lookup(memory_id)
        if obj is None:
            tombstone = self.tombstones.get(memory_id)
            return None if tombstone is None else tombstone.object_type
        return object_type_of(obj)

    def purged_reference(self, index: int, memory_id: MemoryId, what: str) -> None:
        """A new candidate may not refer to a purged memory (a replay keeps its references)."""
        tombstone = self.tombstones.get(memory_id)
        if tombstone is not None and index not in self.replayed:
            self.reasons[index].append(
                f"{PURGED_PREFIX}: {what} {memory_id} was purged at {tombstone.purged_at.isoformat()}; "
                "a new memory cannot refer to it (leave it out)"
            )

    def require(self, index: int, ids: Sequence[MemoryId], allowed: frozenset[ObjectType], what: str) -> None:
        """Each of ``ids`` resolves to an object of an ``allowed`` type."""
        for memory_id in ids:
            self.purged_reference(index, memory_id, what)
            found = self.type_of(memory_id)
            if found is None:
                self.reasons[index].append(f"{what} {memory_id} is neither in the plan nor stored")
            elif found not in allowed:
                names = "/".join(sorted(t.value for t in allowed))
                self.reasons[index].append(
                    f"{what} {memory_id} is {with_article(found.value)}, not {with_article(names)}"
                )

    def candidate(self, index: int, item: MemoryObject | MemoryLink) -> None:
        """Every check of one candidate: identity, references, time order."""
        self.identity(index, item)
        if isinstance(item, MemoryLink):
            for end, memory_id in (("link source", item.from_id), ("link target", item.to_id)):
                self.purged_reference(index, memory_id, end)
            _check_link(item, self.type_of, self.reasons[index])
            ends = [self.lookup(item.from_id), self.lookup(item.to_id)]
            episodes = [
                e
                for o in ends
                if isinstance(o, Observation) and isinstance(e := self.lookup(o.episode_id), Episode)
            ]
            self.warn(index, resolver_without_common_ground(item, ends[0], ends[1], episodes))
        else:
            self.references(index, item)
            if isinstance(item, Observation):
                self.warn(index, observation_echo(item, self.lookup(item.episode_id)))
            elif isinstance(item, Episode):
                self.warn(index, repeated_scene_participant(item))
        if index not in self.replayed:
            # A replay is stored already: it was in order when written (check reports it if not).
            created = {
                memory_id: depended.created_at
                for memory_id in time_order_dependencies(item)
                if (depended := self.lookup(memory_id)) is not None
            }
            out_of_order = time_order_reason(item, created, self.now)
            if out_of_order is not None:
                self.reasons[index].append(out_of_order)

    def lookup(self, memory_id: MemoryId) -> MemoryObject | None:
        """The planned or stored object of ``memory_id`` (``None``: neither)."""
        return self.in_plan.get(memory_id) or self.stored.get(memory_id)

    def warn(self, index: int, warning: ValidationWarning | None) -> None:
        """Add ``warning`` (if any) to the candidate's warnings."""
        if warning is not None:
            self.warnings[index].append(warning)

    def identity(self, index: int, item: MemoryObject | MemoryLink) -> None:
        """Not purged; stored already only with equal content (a replay)."""
        previous = self.stored.get(item.id) or self.stored_links.get(item.id)
        purged = self.tombstones.get(item.id)
        if purged is not None:
            self.reasons[index].append(
                f"{PURGED_PREFIX}: {purged.object_type.value} {item.id} was purged at "
                f"{purged.purged_at.isoformat()} and can never be written again (drop it from the plan)"
            )
        elif previous is not None:
            if type(previous) is type(item) and content_equal(previous, item):
                self.warnings[index].append(ValidationWarning(WarningKind.ALREADY_STORED, (item.id,)))
                self.replayed.add(index)
            else:
                self.reasons[index].append(f"{CONFLICT_PREFIX}: {_conflict_detail(previous, item)}")

    def references(self, index: int, item: MemoryObject) -> None:
        """Every id an object names resolves to an object of the right type."""
        if isinstance(item, Episode):
            self.require(index, item.participant_entity_ids, frozenset({_N}), "participant")
            if item.scene is not None:
                self.require(index, item.scene.participant_entity_ids, frozenset({_N}), "scene participant")
            self.require(index, item.thread_ids, frozenset({_T}), "thread")
        elif isinstance(item, Observation):
            self.require(index, [item.episode_id], frozenset({_E}), "episode")
            if item.speaker_entity_id is not None:
                self.require(index, [item.speaker_entity_id], frozenset({_N}), "speaker")
            self.require(index, item.mentioned_entity_ids, frozenset({_N}), "mentioned notion")
        elif isinstance(item, DerivedMemory):
            _check_derived(item, self.reasons[index])
            self.require(index, item.episode_ids, frozenset({_E}), "source episode")
            self.require(index, item.observation_ids, frozenset({_O}), "source observation")
            self.require(index, item.entity_ids, frozenset({_N}), "subject")
            self.require(index, item.thread_ids, frozenset({_T}), "thread")
            self.require(index, item.supersedes, frozenset({_D}), "superseded memory")

    def supersession(self, reasons: dict[MemoryId, list[str]]) -> None:
        """Add :func:`check_supersession`'s reasons to each successor's first candidate."""
        if reasons:
            first_index = {c.id: i for i, c in reversed(list(enumerate(self.candidates)))}
            for successor_id, why in reasons.items():
                self.reasons[first_index[successor_id]].extend(why)

    def derived(self, plan: RememberWritePlan, derived_links: tuple[MemoryLink, ...]) -> None:
        """The plan's derived links and index entries are those its objects imply."""
        differ = _derived_links_differ(plan.derived_links, derived_links)
        conflicts = self.derived_conflicts(derived_links)
        if (differ or conflicts) and plan.objects and not any(self.reasons.values()):
            self.reasons[0].append("the plan's derived links do not match its objects; re-prepare the plan")
        if tuple(plan.index_entries) != index_entries(plan.objects) and plan.objects and not self.reasons[0]:
            self.reasons[0].append("the plan's index entries do not match its objects; re-prepare the plan")

    def derived_conflicts(self, derived_links: Sequence[MemoryLink]) -> bool:
        """Whether a derived link's id is stored with other content (each gets a reason)."""
        found = False
        for link in derived_links:
            previous = self.stored.get(link.id) or self.stored_links.get(link.id)
            if previous is not None and not (
                isinstance(previous, MemoryLink) and content_equal(previous, link)
            ):
                found = True
                owner = next(
                    (i for i, c in enumerate(self.candidates) if c.id in (link.from_id, link.to_id)), 0
                )
                self.reasons[owner].append(
                    f"{CONFLICT_PREFIX}: derived {link.relation.value} link {link.id} is already stored "
                    "with different content"
                )
        return found

    def validations(self) -> list[CandidateValidation]:
        """One validation per candidate, in plan order."""
        return [
            CandidateValidation(
                candidate_id=item.id,
                kind=_kind(item),
                status=CandidateValidationStatus.INVALID
                if self.reasons[i]
                else CandidateValidationStatus.VALID,
                reasons=tuple(self.reasons[i]),
                warnings=tuple(self.warnings[i]),
            )
            for i, item in enumerate(self.candidates)
        ]


def _derived_links_differ(planned: Sequence[MemoryLink], expected: tuple[MemoryLink, ...]) -> bool:
    """Whether a plan's derived links differ in content from those recomputed from its objects."""
    # Equal links (``==``: same ids, relation, rationale, instants) have equal content; only a
    # plan whose derived links differ from the recomputed ones needs the canonical comparison.
    if tuple(planned) == expected:
        return False
    by_id = {link.id: link for link in planned}
    wanted = {link.id: link for link in expected}
    return set(by_id) != set(wanted) or any(not content_equal(by_id[i], wanted[i]) for i in wanted)


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


def _conflict_detail(stored: MemoryObject | MemoryLink, new: MemoryObject | MemoryLink) -> str:
    """Why an id conflicts: another kind, or the fields whose content differs."""
    if type(stored) is not type(new):
        return f"id already stored as {with_article(_kind(stored))}, not {with_article(_kind(new))}"
    old = unstructure_item(stored, canonical=True)
    fresh = unstructure_item(new, canonical=True)
    fields = sorted(key for key in old.keys() | fresh.keys() if old.get(key) != fresh.get(key))
    hint = ""
    if "created_at" in fields:
        hint = " (created_at defaults to the clock: pass created_at, or keep and replay the plan)"
    return f"id already stored as {with_article(_kind(stored))} with different {', '.join(fields)}{hint}"


def object_references(obj: MemoryObject) -> set[MemoryId]:
    """Every id a stored object names (sources, subjects, threads, episode, speaker, superseded)."""
    if isinstance(obj, Episode):
        return {*obj.involved_entity_ids, *obj.thread_ids}
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
        f"created ({created}); {with_article(kind)} cannot predate its {role}: pass a {field} at or "
        f"after {created}"
    )


#: How plan validation phrases each breach of the grounding rule (:func:`belief_breaches`).
_BELIEF_REASONS: Final = {
    BeliefBreachKind.GIVEN_WITH_SOURCES: (
        "given_by_application cannot coexist with source episodes or observations; "
        "drop the sources or the declaration"
    ),
    BeliefBreachKind.GIVEN_WITHOUT_SUBJECT: "given_by_application needs at least one notion in entity_ids",
    BeliefBreachKind.UNGROUNDED: (
        "a derived memory needs source episode_ids/observation_ids, or "
        "given_by_application=True with a notion subject"
    ),
    BeliefBreachKind.SUBJECT_NOT_LISTED: "invalid belief: assertion subject {subject} is not in entity_ids",
    BeliefBreachKind.ROLE_ON_OTHER_TYPE: (
        "invalid belief: {subject} is given an obligation role (Actor/Counterpart), which only a "
        "commitment or an open_loop may assert"
    ),
    BeliefBreachKind.BOTH_ROLES: (
        "invalid belief: {subject} is both Actor and Counterpart of one obligation; name who owes "
        "and to whom as two different notions"
    ),
}


def _check_derived(item: DerivedMemory, reasons: list[str]) -> None:
    breaches = belief_breaches(
        given=item.given_by_application,
        has_sources=bool(item.source_ids),
        entity_ids=item.entity_ids,
        assertions=item.assertions,
        derived_type=item.derived_type,
    )
    reasons.extend(_BELIEF_REASONS[breach.kind].format(subject=breach.subject) for breach in breaches)
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
