"""Pure lifecycle and identity rules, each in exactly one place.

Nothing here touches a store: adapters and use cases call these functions so that a rule exists
once, under its name in docs/concepts/lifecycle.md. Currency ("current iff not suppressed and not
superseded") lives in :mod:`charmem.domain.currency`; :func:`is_current` stays importable from here.
"""

from __future__ import annotations

import enum
import json
import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from datetime import datetime, timedelta
from typing import Final

import attrs

from charmem.domain.currency import is_current
from charmem.domain.ids import ID_ORDER, MemoryId
from charmem.domain.model import (
    Actor,
    BeliefAssertion,
    Counterpart,
    DerivedType,
    MemoryLink,
    MemoryObject,
    Observation,
    Relation,
)
from charmem.errors import LifecycleErrorKind, LifecycleValidationError

__all__ = [
    "OBLIGATION_TYPES",
    "RECORDED_AT_SKEW",
    "BeliefBreach",
    "BeliefBreachKind",
    "TimeOrderBreach",
    "asks_question",
    "belief_breaches",
    "canonical_content",
    "conflicting_successors",
    "content_equal",
    "derived_link_id",
    "is_current",
    "name_occurs_in",
    "name_spans",
    "normalise_name",
    "recorded_in_order",
    "replies_to",
    "spaced",
    "spoken_question",
    "supersession_cycles",
    "time_order_breach",
    "voiced_text",
    "word_bounded_starts",
]

#: How far ahead of the memory's ``Clock`` a lifecycle operation's ``recorded_at`` may be: the
#: clock of the process that chose it may run a little ahead. Five minutes covers ordinary drift
#: between machines and keeps a mistyped date (hours, days) from being accepted.
RECORDED_AT_SKEW: Final = timedelta(minutes=5)

#: The derived types that may name obligation parties (:class:`~charmem.domain.model.Actor`,
#: :class:`~charmem.domain.model.Counterpart`).
OBLIGATION_TYPES: Final = frozenset({DerivedType.COMMITMENT, DerivedType.OPEN_LOOP})

_WHITESPACE = re.compile(r"\s+")
#: Question marks: ``?``, the interrobang and ``⁇ ⁈ ⁉`` (U+203D, U+2047-2049), the full-width and
#: small question marks (U+FF1F, U+FE56), the Arabic and Greek ones (U+061F, U+037E), and the
#: question mark ornaments (U+2753, U+2754).
_QUESTION_MARK_CHARS = "?\u203d\u2047\u2048\u2049\uff1f\ufe56\u061f\u037e\u2753\u2754"
_QUESTION_MARKS = frozenset(_QUESTION_MARK_CHARS)
#: Sentence-final marks: ``. ! ?``, the ellipsis, the ideographic full stop, the full-width
#: exclamation mark, and every question mark below.
_SENTENCE_MARKS = ".!\u2026\u3002\uff01" + _QUESTION_MARK_CHARS
_WORD_CHAR = re.compile(r"\w")
_INNER_MARKS = ".!?"  # ASCII marks that also occur inside tokens: links, decimals, domains
_MARK_RUN = re.compile(f"[{re.escape(_SENTENCE_MARKS)}]+")


class BeliefBreachKind(enum.Enum):
    """Which part of the grounding rule of a derived memory is broken (:func:`belief_breaches`)."""

    GIVEN_WITH_SOURCES = "given_with_sources"
    GIVEN_WITHOUT_SUBJECT = "given_without_subject"
    UNGROUNDED = "ungrounded"
    SUBJECT_NOT_LISTED = "subject_not_listed"
    ROLE_ON_OTHER_TYPE = "role_on_other_type"
    BOTH_ROLES = "both_roles"


@attrs.frozen
class BeliefBreach:
    """How a derived memory breaks the grounding rule.

    Attributes:
        kind: the part of the rule broken.
        subject: the assertion subject missing from ``entity_ids`` (``SUBJECT_NOT_LISTED``), or
            holding an obligation role it may not (``ROLE_ON_OTHER_TYPE``, ``BOTH_ROLES``); else
            ``None``.
    """

    kind: BeliefBreachKind
    subject: MemoryId | None = None


def belief_breaches(
    *,
    given: bool,
    has_sources: bool,
    entity_ids: Iterable[MemoryId],
    assertions: Iterable[BeliefAssertion],
    derived_type: DerivedType | None = None,
) -> list[BeliefBreach]:
    """The grounding rule of a derived memory, given beliefs included, and its obligation roles.

    A derived memory is grounded on source episodes or observations, or given by the
    application (``given_by_application``): a given belief has no sources and at least one notion
    subject in ``entity_ids``. Every assertion names a subject among ``entity_ids``. Obligation
    roles (:class:`~charmem.domain.model.Actor`, who owes; :class:`~charmem.domain.model.Counterpart`,
    to whom) are asserted only by ``commitment`` and ``open_loop`` memories, and one subject
    never holds both in one memory. Plan validation and ``correct`` both apply this rule, each
    phrasing the breaches its own way.

    Args:
        given: the memory is declared ``given_by_application``.
        has_sources: it names source episodes or observations.
        entity_ids: its notion subjects.
        assertions: its belief assertions, in order.
        derived_type: its type (``None``: not known yet, roles unchecked).

    Returns:
        list[BeliefBreach]: every breach, in this order: a given belief with sources, a given
        belief without a subject, a memory neither given nor grounded, each assertion whose
        subject is not listed, each role on another type, each subject holding both roles;
        empty when the rule holds.
    """
    subjects = set(entity_ids)
    assertions = list(assertions)
    breaches: list[BeliefBreach] = []
    if given:
        if has_sources:
            breaches.append(BeliefBreach(BeliefBreachKind.GIVEN_WITH_SOURCES))
        if not subjects:
            breaches.append(BeliefBreach(BeliefBreachKind.GIVEN_WITHOUT_SUBJECT))
    elif not has_sources:
        breaches.append(BeliefBreach(BeliefBreachKind.UNGROUNDED))
    breaches += [
        BeliefBreach(BeliefBreachKind.SUBJECT_NOT_LISTED, assertion.subject)
        for assertion in assertions
        if assertion.subject not in subjects
    ]
    return breaches + _role_breaches(assertions, derived_type)


def _role_breaches(assertions: list[BeliefAssertion], derived_type: DerivedType | None) -> list[BeliefBreach]:
    """Roles on a type that holds none (``derived_type`` known), then subjects holding both."""
    roles = [a for a in assertions if isinstance(a.predicate, Actor | Counterpart)]
    breaches: list[BeliefBreach] = []
    if derived_type is not None and derived_type not in OBLIGATION_TYPES:
        breaches += [BeliefBreach(BeliefBreachKind.ROLE_ON_OTHER_TYPE, a.subject) for a in roles]
    actors = {a.subject for a in roles if isinstance(a.predicate, Actor)}
    owed = {a.subject for a in roles if isinstance(a.predicate, Counterpart)}
    return breaches + [BeliefBreach(BeliefBreachKind.BOTH_ROLES, s) for s in sorted(actors & owed, key=str)]


def supersession_cycles(edges: Iterable[tuple[MemoryId, MemoryId]]) -> list[tuple[MemoryId, ...]]:
    """The cycles ``supersedes`` links form (rule: supersession is acyclic).

    A memory in a cycle is superseded by a memory it (indirectly) supersedes: none of them is
    current, and retrieval, which reaches superseded memories only from current ones, never
    reaches them. One cycle is named per group of memories that all reach each other (a strongly
    connected group), the shortest one through the group's smallest id; a memory superseding
    itself is a cycle of one.

    Args:
        edges: ``(successor, predecessor)`` pairs: ``successor`` supersedes ``predecessor``.

    Returns:
        list[tuple[MemoryId, ...]]: each cycle as the ids along it, starting at its smallest id
        (each supersedes the next, the last supersedes the first); sorted by first id; empty
        when the links are acyclic.
    """
    following: dict[MemoryId, set[MemoryId]] = {}
    for successor, predecessor in edges:
        following.setdefault(successor, set()).add(predecessor)
        following.setdefault(predecessor, set())
    cycles = []
    for group in _strongly_connected(following):
        start = min(group, key=ID_ORDER)
        if len(group) > 1 or start in following[start]:
            cycles.append(_shortest_cycle(start, group, following))
    return sorted(cycles, key=lambda cycle: ID_ORDER(cycle[0]))


def _strongly_connected(following: Mapping[MemoryId, AbstractSet[MemoryId]]) -> list[set[MemoryId]]:
    """Tarjan's strongly connected components, iteratively (chains may be long)."""
    index: dict[MemoryId, int] = {}
    low: dict[MemoryId, int] = {}
    stack: list[MemoryId] = []
    on_stack: set[MemoryId] = set()
    groups: list[set[MemoryId]] = []
    for root in sorted(following, key=ID_ORDER):
        if root in index:
            continue
        work = [(root, iter(sorted(following[root], key=ID_ORDER)))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, successors = work[-1]
            advanced = False
            for nxt in successors:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(following[nxt], key=ID_ORDER))))
                    advanced = True
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.add(member)
                    if member == node:
                        break
                groups.append(group)
    return groups


def _shortest_cycle(
    start: MemoryId, group: AbstractSet[MemoryId], following: Mapping[MemoryId, AbstractSet[MemoryId]]
) -> tuple[MemoryId, ...]:
    """The shortest path from ``start`` back to itself inside ``group`` (breadth first)."""
    parent: dict[MemoryId, MemoryId] = {}
    frontier = [start]
    while frontier:
        reached: list[MemoryId] = []
        for node in frontier:
            for nxt in sorted(following[node], key=ID_ORDER):
                if nxt == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(parent[path[-1]])
                    return tuple(reversed(path))
                if nxt in group and nxt not in parent:
                    parent[nxt] = node
                    reached.append(nxt)
        frontier = reached
    raise AssertionError("a strongly connected group always has a cycle through each member")


def conflicting_successors(
    stored: AbstractSet[MemoryId], written: AbstractSet[MemoryId]
) -> tuple[MemoryId, ...]:
    """Whether a write may add ``supersedes`` links to one memory (rule: successors in one plan).

    A memory gains successors in one write only: one plan (a split into several successors and a
    merge of several predecessors stay allowed) or one correction. A later write may not supersede
    a memory another memory already supersedes; replaying the same write adds nothing new and
    stays accepted.

    Args:
        stored: the memories already superseding it (sources of its stored ``supersedes`` links).
        written: the memories the write makes supersede it (stored ones included on a replay).

    Returns:
        tuple[MemoryId, ...]: the stored successors that forbid the write, sorted; empty when the
        write is allowed (nothing stored yet, or every successor it writes is already stored).
    """
    if not stored or written <= stored:
        return ()
    return tuple(sorted(stored, key=ID_ORDER))


@attrs.frozen
class TimeOrderBreach:
    """How an instant breaks time order (:func:`time_order_breach`).

    Attributes:
        kind: ``RECORDED_IN_FUTURE`` (later than the clock's now plus :data:`RECORDED_AT_SKEW`) or
            ``RECORDED_BEFORE_TARGET`` (before a memory it depends on was created).
        bound: the latest instant allowed (``RECORDED_IN_FUTURE``) or the earlier memory's
            ``created_at`` (``RECORDED_BEFORE_TARGET``); timezone-aware.
        earlier_id: the memory the instant precedes (``RECORDED_BEFORE_TARGET``), else ``None``.
    """

    kind: LifecycleErrorKind
    bound: datetime
    earlier_id: MemoryId | None = None


def time_order_breach(
    at: datetime, *, earlier: Mapping[MemoryId, datetime], now: datetime | None = None
) -> TimeOrderBreach | None:
    """Whether something written at ``at`` breaks time order (rule: memories are in time order).

    What is written may not be dated later than the clock's now plus :data:`RECORDED_AT_SKEW`,
    nor before a memory it depends on was created: a lifecycle record's targets, a successor's
    superseded memories, a derived memory's source episodes and observations, an observation's
    episode, a link's endpoints. Equal instants are in order. Otherwise an ``as_of`` view would
    show a memory's successor, grounding or change before the memory existed, and a memory
    dated in the clock's future would be recalled by the default view but not by
    ``as_of=now``, and could not be forgotten until the clock reached it.

    Args:
        at: the instant the memory, link or record is dated at (``created_at``/``recorded_at``);
            timezone-aware.
        earlier: the memories it depends on -> their ``created_at``.
        now: the clock's now; ``None`` skips the future check.

    Returns:
        TimeOrderBreach | None: the first breach (future first, then the earlier memories in
        canonical id order), or ``None`` when ``at`` is in order.
    """
    if now is not None and at > now + RECORDED_AT_SKEW:
        return TimeOrderBreach(LifecycleErrorKind.RECORDED_IN_FUTURE, now + RECORDED_AT_SKEW)
    for memory_id, created_at in sorted(earlier.items(), key=lambda item: ID_ORDER(item[0])):
        if at < created_at:
            return TimeOrderBreach(LifecycleErrorKind.RECORDED_BEFORE_TARGET, created_at, memory_id)
    return None


def recorded_in_order(
    recorded_at: datetime, *, targets: Mapping[MemoryId, datetime], now: datetime, what: str
) -> datetime:
    """The instant to record a lifecycle operation at (rule: lifecycle records are in time order).

    A correct, forget or link is refused when recorded before one of its targets was created (a
    link's targets are both endpoints) or later than the clock's now plus
    :data:`RECORDED_AT_SKEW` (:func:`time_order_breach`). A time ahead of the clock within the
    skew is recorded as the clock's now, so nothing is ever recorded in the clock's future and
    the default view always equals ``as_of=now``.

    Args:
        recorded_at: the operation's ``recorded_at`` (or the clock's now when the draft left it
            out); timezone-aware.
        targets: the memories the operation changes -> their ``created_at``.
        now: the clock's now.
        what: how the message names the operation (``"correction"``, ``"forget"``, ``"link"``).

    Returns:
        datetime: ``recorded_at``, or ``now`` when ``recorded_at`` is ahead of it within the skew.

    Raises:
        LifecycleValidationError: ``RECORDED_IN_FUTURE`` beyond the skew; ``RECORDED_BEFORE_TARGET``
            when the instant to record precedes a target's ``created_at``.
    """
    if time_order_breach(recorded_at, earlier={}, now=now) is not None:
        raise LifecycleValidationError(
            LifecycleErrorKind.RECORDED_IN_FUTURE,
            f"the {what} is recorded at {recorded_at.isoformat()}, more than {RECORDED_AT_SKEW} after "
            f"the clock's now ({now.isoformat()}); pass a recorded_at up to now, or leave it out",
        )
    at = min(recorded_at, now)
    breach = time_order_breach(at, earlier=targets)
    if breach is not None:
        created_at = breach.bound
        ahead = (
            f"; {breach.earlier_id} is dated ahead of the clock, so it can be changed from then on"
            if created_at > now
            else ""
        )
        raise LifecycleValidationError(
            LifecycleErrorKind.RECORDED_BEFORE_TARGET,
            f"the {what} is recorded at {at.isoformat()}, before {breach.earlier_id} was created "
            f"({created_at.isoformat()}); a lifecycle record cannot precede its target: pass a "
            f"recorded_at at or after {created_at.isoformat()}{ahead}",
        )
    return at


def derived_link_id(collection: str, from_id: MemoryId, relation: Relation, to_id: MemoryId) -> MemoryId:
    """The id of a link commit derives: ``MemoryId.deterministic(collection, from, relation, to)``.

    Replays therefore never duplicate derived links.
    """
    return MemoryId.deterministic(collection, from_id, relation.value, to_id)


def canonical_content(item: MemoryObject | MemoryLink) -> str:
    """The canonical encoding of an object's or link's authored content: what replays compare.

    Sorted keys, instants normalised to UTC, id collections in canonical order, the object kind
    included: two stored values are the same content iff their encodings are equal. Order of
    caller-supplied id lists never matters.

    Returns:
        str: a JSON document.
    """
    from charmem.domain.serde import unstructure_item  # local: serde imports this module's peers

    return json.dumps(unstructure_item(item, canonical=True), sort_keys=True, ensure_ascii=False)


def content_equal(left: MemoryObject | MemoryLink, right: MemoryObject | MemoryLink) -> bool:
    """Whether two objects or links hold equal content under :func:`canonical_content`."""
    return canonical_content(left) == canonical_content(right)


def normalise_name(name: str) -> str:
    """Normalise a ``KnownAs`` name for matching notions by name.

    NFKC (width), ``lower()`` (case, never ``casefold``: ``Straße`` and ``STRASSE`` differ), runs of
    whitespace collapsed to one space, trimmed.
    """
    return spaced(name).lower()


def spaced(text: str) -> str:
    """``text`` in NFKC (width) with runs of whitespace collapsed to one space, trimmed; case kept.

    :func:`normalise_name` is its lower case (``lower()`` never adds or removes whitespace).
    """
    return _WHITESPACE.sub(" ", unicodedata.normalize("NFKC", text)).strip()


def word_bounded_starts(needle: str, haystack: str) -> list[int]:
    r"""Where ``needle`` starts in ``haystack`` with no word character (``\w``) right before or after.

    The occurrences :func:`name_spans` finds, by position (ascending); none for an empty needle.
    """
    found: list[int] = []
    start = haystack.find(needle) if needle else -1
    while start >= 0:
        end = start + len(needle)
        before = start == 0 or _WORD_CHAR.match(haystack[start - 1]) is None
        after = end == len(haystack) or _WORD_CHAR.match(haystack[end]) is None
        if before and after:
            found.append(start)
        start = haystack.find(needle, start + 1)
    return found


def name_occurs_in(name: str, text: str) -> bool:
    r"""Whether ``name``'s normalised form occurs in ``text``'s normalised form on word boundaries.

    The occurrence neither follows nor precedes a word character (``\w``, Unicode): the names a
    query mentions are the normalised names among :func:`name_spans` of its normalised form.
    """
    needle = normalise_name(name)
    return bool(needle) and needle in name_spans(normalise_name(text), (len(needle),))


def name_spans(haystack: str, lengths: Iterable[int]) -> set[str]:
    r"""The substrings of ``haystack`` of one of ``lengths`` characters that lie on word boundaries.

    A substring lies on word boundaries when no word character (``\w``, Unicode, as :mod:`re`
    defines it) comes right before it or right after it; its own first and last characters may be
    of any kind. The work is in ``len(haystack)`` times the number of distinct lengths, whatever
    the number of names looked for.

    Args:
        haystack: a text normalised with :func:`normalise_name`.
        lengths: substring lengths in characters (positive).

    Returns:
        set[str]: the substrings, each once.
    """
    size = len(haystack)
    edge = [True] + [_WORD_CHAR.match(c) is None for c in haystack] + [True]
    # edge[k] is True when position k (0..size) has no word character on the relevant side:
    # a start k needs haystack[k - 1] not a word character, an end k needs haystack[k] not one.
    wanted = sorted({n for n in lengths if n > 0})
    return {
        haystack[start : start + n]
        for start in range(size)
        if edge[start]
        for n in wanted
        if start + n <= size and edge[start + n + 1]
    }


def voiced_text(text: str, speaker_names: Sequence[str]) -> str:
    """The text candidate recall embeds for an utterance: who said it, then what was said.

    An observation's own text rarely names its speaker ("I went to the support group
    yesterday"), yet questions about it do ("When did Caroline go to the support group?"). Dense
    and lexical recall both need the speaker in the indexed text: on LoCoMo turns, plain dense
    recall@10 goes from 0.24 to 0.54 with it (measured, benchmarks/locomo.py era of session 2).
    The stored observation keeps its text as written; only the index sees this form.

    Args:
        text: the observation's text.
        speaker_names: the speaker's current ``KnownAs`` names as spelled, in a stable order;
            empty when the speaker is unknown or unnamed.

    Returns:
        str: ``'<names joined by " / "> said, "<text>"'``, or ``text`` unchanged without names.
    """
    if not speaker_names:
        return text
    return f'{" / ".join(speaker_names)} said, "{text}"'


def sorted_ids(ids: Iterable[MemoryId]) -> tuple[MemoryId, ...]:
    """De-duplicate and sort ids canonically."""
    return tuple(sorted(set(ids)))


def asks_question(text: str) -> bool:
    """Whether an utterance ends by asking: its last run of sentence-final marks holds a question mark.

    ``"Where did you go? [image: a lake]"`` asks (an appended caption has no mark), and so does
    ``"You did?!"``; ``"Really? That's great."`` does not, nor does a text without any mark. A
    last sentence without a mark is not seen (``"Really? That's great"`` asks), and a mark inside
    an appended caption is (``"Where? [image: a lake.]"`` does not ask). Marks: ``. !
    ?``, the ellipsis, the ideographic full stop, the full-width exclamation mark, and the
    question marks: ``?``, the interrobang, ``⁇ ⁈ ⁉``, full-width, small, Arabic and Greek ones
    and the ornaments (U+2753, U+2754). The Greek question mark is read only as U+037E: NFC
    normalisation turns it into a semicolon, which is not read. A run whose last mark is an
    ASCII ``.``, ``!`` or ``?`` directly followed by a letter or digit is inside a token, not at
    a sentence's end (a link's ``r?id=3``, ``3.5``, ``example.com``): ``"The recipe:
    https://example.com/r?id=3"`` does not ask. Scripts written without spaces end sentences on
    their own marks (a full-width question mark before more Japanese text asks).
    """
    end = len(text.rstrip()) - 1  # most utterances end on their mark; else C-level scans
    if end < 0 or text[end] not in _SENTENCE_MARKS:
        end = max(text.rfind(mark) for mark in _SENTENCE_MARKS)
        if end >= 0 and text[end] in _INNER_MARKS and text[end + 1 : end + 2].isalnum():
            return not _QUESTION_MARKS.isdisjoint(_last_final_run(text))  # the last mark is in a token
    if end < 0:
        return False
    head = text[: end + 1]
    run = head[len(head.rstrip(_SENTENCE_MARKS)) :]
    return not _QUESTION_MARKS.isdisjoint(run)


def _last_final_run(text: str) -> str:
    """The last run of sentence marks in ``text`` that ends a sentence (not inside a token), or ``""``."""
    last = ""
    for match in _MARK_RUN.finditer(text):
        run = match.group()
        if run[-1] not in _INNER_MARKS or not text[match.end() : match.end() + 1].isalnum():
            last = run
    return last


def spoken_question(observation: Observation) -> bool:
    """Whether an observation is a question someone asked: a known speaker, and it asks.

    Questions and replies belong to a conversation between speakers (:func:`asks_question` for
    the text): an observation without a speaker, a perceived detail or a whole exchange stored as
    one text ("User: ... Assistant: ...?"), is neither.
    """
    return observation.speaker_entity_id is not None and asks_question(observation.text)


def replies_to(turn: MemoryObject | None, recalled: Observation) -> bool:
    """Whether ``turn``, the observation right after ``recalled`` in its episode, is its reply.

    It is when ``recalled`` is a spoken question (:func:`spoken_question`) and ``turn`` an
    observation said after it by another known speaker: the next turn of a conversation answers
    the question before it. Turns observed at the same instant have no order (they are listed by
    id), so neither is the other's reply.
    """
    if not isinstance(turn, Observation) or not spoken_question(recalled):
        return False
    speaker = turn.speaker_entity_id
    return (
        speaker is not None
        and speaker != recalled.speaker_entity_id
        and turn.observed_at > recalled.observed_at
    )
