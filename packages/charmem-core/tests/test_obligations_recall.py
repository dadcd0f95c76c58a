"""Obligations in recall: a settled matter leaves its section and names its resolvers (forgetting
the resolver keeps it settled), its direction is relative to the character, and every item says
how long ago it was last supported. On the reference stack."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import attrs
import pytest

from charmem import (
    Actor,
    BeliefAssertion,
    CharacterMemory,
    ContinuityContextPack,
    Counterpart,
    DerivedMemoryDraft,
    DerivedType,
    EntityDraft,
    EpisodeDraft,
    ForgetMemoryDraft,
    LinkDraft,
    MemoryId,
    ObservationDraft,
    Relation,
    RememberDrafts,
    RetrievalContext,
    ThreadDraft,
)
from charmem.domain.pack import AdmissionRoad, ObligationDirection, PackItem
from charmem.domain.retrieval import PACK_FORMAT_VERSION
from charmem.stats import InMemoryRetrievalStatsStore
from charmem.testing import HashingEmbeddingProvider, ReferenceGraphStore, ReferenceVectorIndex

T0 = datetime(2024, 5, 8, 13, 56, tzinfo=UTC)  # the clock's now


class FixedClock:
    def now(self) -> datetime:
        return T0


PROMISED = datetime(2024, 5, 1, 18, 0, tzinfo=UTC)
RECORDED = PROMISED + timedelta(hours=1)
KEPT = datetime(2024, 5, 4, 10, 0, tzinfo=UTC)
ME, ANA, BEN = (MemoryId.deterministic("obligations", name) for name in ("me", "ana", "ben"))
EPISODE, PROMISE, ASK = (MemoryId.deterministic("obligations", name) for name in ("visit", "promise", "ask"))
BOOK, PHOTOS = (MemoryId.deterministic("obligations", name) for name in ("book", "photos"))
RETURN_VISIT, RETURNED, RETURN_LINK = (
    MemoryId.deterministic("obligations", name) for name in ("return-visit", "returned", "return-link")
)


def _memory(character_id: MemoryId | None) -> CharacterMemory:
    embedder = HashingEmbeddingProvider()
    return CharacterMemory(
        graph=ReferenceGraphStore("obligations"),
        vectors=ReferenceVectorIndex(
            "obligations", model_id=embedder.model_id, vector_size=embedder.vector_size
        ),
        embedder=embedder,
        stats=InMemoryRetrievalStatsStore("obligations"),
        collection="obligations",
        clock=FixedClock(),
        character_id=character_id,
    )


async def _promises(memory: CharacterMemory) -> None:
    """I promised Ana her book back; Ana owes me the photos from Porto."""
    await memory.remember(
        RememberDrafts(
            entities=[EntityDraft(id=i, entity_type="person", created_at=PROMISED) for i in (ME, ANA, BEN)],
            episodes=[
                EpisodeDraft(
                    id=EPISODE, occurred_at=PROMISED, participant_entity_ids=[ME, ANA], created_at=RECORDED
                )
            ],
            observations=[
                ObservationDraft(
                    id=PROMISE,
                    episode_id=EPISODE,
                    text="I'll bring your book back on Saturday, Ana.",
                    created_at=RECORDED,
                ),
                ObservationDraft(
                    id=ASK,
                    episode_id=EPISODE,
                    text="Ana said she would send the Porto photos.",
                    created_at=RECORDED,
                ),
            ],
            derived=[
                DerivedMemoryDraft(
                    DerivedType.COMMITMENT,
                    "Return Ana's book on Saturday.",
                    id=BOOK,
                    entity_ids=[ME, ANA],
                    observation_ids=[PROMISE],
                    assertions=[BeliefAssertion(ME, Actor()), BeliefAssertion(ANA, Counterpart())],
                    created_at=RECORDED,
                ),
                DerivedMemoryDraft(
                    DerivedType.OPEN_LOOP,
                    "Ana will send the photos from Porto.",
                    id=PHOTOS,
                    entity_ids=[ME, ANA],
                    observation_ids=[ASK],
                    assertions=[BeliefAssertion(ANA, Actor()), BeliefAssertion(ME, Counterpart())],
                    created_at=RECORDED,
                ),
            ],
        )
    )


async def _keep_the_promise(memory: CharacterMemory) -> None:
    """The book went back on Saturday: a claim grounded on that visit fulfils the commitment."""
    await memory.remember(
        RememberDrafts(
            episodes=[
                EpisodeDraft(
                    id=RETURN_VISIT, occurred_at=KEPT, summary="Gave Ana her book back.", created_at=KEPT
                )
            ],
            derived=[
                DerivedMemoryDraft(
                    DerivedType.CLAIM,
                    "I returned the book to Ana.",
                    id=RETURNED,
                    entity_ids=[ME, ANA],
                    episode_ids=[RETURN_VISIT],
                    created_at=KEPT,
                )
            ],
            links=[LinkDraft(RETURNED, Relation.FULFILLS_COMMITMENT, BOOK, id=RETURN_LINK, recorded_at=KEPT)],
        )
    )


@pytest.fixture
async def memory() -> AsyncIterator[CharacterMemory]:
    mem = _memory(ME)
    try:
        await _promises(mem)
        yield mem
    finally:
        await mem.close()


def _item(pack: ContinuityContextPack, memory_id: MemoryId) -> PackItem:
    [item] = [i for i in pack.items if i.id == memory_id]
    return item


async def _recall(memory: CharacterMemory, **more: object) -> ContinuityContextPack:
    return await memory.retrieve(RetrievalContext(query="Ana's book and the Porto photos", **more))  # type: ignore[arg-type]


async def test_an_open_obligation_is_listed_in_its_section(memory: CharacterMemory) -> None:
    pack = await _recall(memory)
    assert BOOK in pack.sections["commitments"]
    assert PHOTOS in pack.sections["open_loops"]
    assert _item(pack, BOOK).resolved_by == ()
    assert "commitment (I owe): Return Ana's book on Saturday." in pack.render()
    assert "open_loop (owed to me): Ana will send the photos from Porto." in pack.render()


async def test_a_fulfilled_commitment_leaves_its_section_and_names_its_resolver(
    memory: CharacterMemory,
) -> None:
    await _keep_the_promise(memory)
    pack = await _recall(memory)
    book = _item(pack, BOOK)
    assert book.resolved_by == (RETURNED,)
    assert BOOK not in pack.sections["commitments"]
    assert BOOK in pack.sections["derived_memories"]
    assert book.direction is ObligationDirection.OWED_BY_CHARACTER  # still who owed it
    assert PHOTOS in pack.sections["open_loops"]  # the other matter is untouched
    assert "commitment (settled, I owed): Return Ana's book on Saturday." in pack.render()
    data = pack.to_dict()
    assert data["format_version"] == PACK_FORMAT_VERSION == 2
    [entry] = [i for i in data["items"] if i["id"] == str(BOOK)]
    assert entry["resolved_by"] == [str(RETURNED)]
    assert entry["direction"] == "owed_by_character"
    # an as_of view before the link was recorded still owes it
    before = await _recall(memory, as_of=KEPT - timedelta(minutes=1))
    assert _item(before, BOOK).resolved_by == ()
    assert BOOK in before.sections["commitments"]


async def test_resolves_settles_an_open_loop(memory: CharacterMemory) -> None:
    await memory.link(LinkDraft(ASK, Relation.RESOLVES, PHOTOS, recorded_at=KEPT))
    pack = await _recall(memory)
    assert _item(pack, PHOTOS).resolved_by == (ASK,)
    assert PHOTOS not in pack.sections["open_loops"]
    assert PHOTOS in pack.sections["derived_memories"]
    assert "open_loop (settled, was owed to me)" in pack.render()


async def test_forgetting_the_resolver_keeps_the_matter_settled(memory: CharacterMemory) -> None:
    """Forgetting appends a suppression record and leaves links: the matter stays settled, the
    resolver's id stays in ``resolved_by`` (an id, not content), and the resolver is never an
    item nor its text in the prompt."""
    await _keep_the_promise(memory)
    await memory.forget(ForgetMemoryDraft.suppress(RETURNED, "not to be recalled", recorded_at=T0))
    pack = await memory.retrieve(RetrievalContext(query="I returned the book to Ana"))
    book = _item(pack, BOOK)
    assert book.resolved_by == (RETURNED,)
    assert BOOK in pack.sections["derived_memories"]
    assert BOOK not in pack.sections["commitments"]
    assert RETURNED not in {item.id for item in pack.items}
    assert "I returned the book to Ana." not in pack.render()


@pytest.mark.parametrize(
    ("character", "book", "photos"),
    [
        pytest.param(
            ME,
            ObligationDirection.OWED_BY_CHARACTER,
            ObligationDirection.OWED_TO_CHARACTER,
            id="the promiser",
        ),
        pytest.param(
            ANA,
            ObligationDirection.OWED_TO_CHARACTER,
            ObligationDirection.OWED_BY_CHARACTER,
            id="the other party",
        ),
        pytest.param(BEN, None, None, id="neither party"),
        pytest.param(None, None, None, id="no character id"),
    ],
)
async def test_direction_is_relative_to_the_character(
    character: MemoryId | None, book: ObligationDirection | None, photos: ObligationDirection | None
) -> None:
    memory = _memory(character)
    try:
        await _promises(memory)
        pack = await _recall(memory)
    finally:
        await memory.close()
    assert (_item(pack, BOOK).direction, _item(pack, PHOTOS).direction) == (book, photos)
    assert all(item.direction is None for item in pack.items if item.id not in {BOOK, PHOTOS})
    if character in {BEN, None}:
        assert "(I owe)" not in pack.render() and "(owed to me)" not in pack.render()


async def test_every_item_is_admitted_by_the_topic_and_says_how_long_ago_it_was_supported(
    memory: CharacterMemory,
) -> None:
    pack = await _recall(memory)
    assert {item.admitted_by for item in pack.items} == {(AdmissionRoad.TOPIC,)}
    promised = int((T0 - PROMISED).total_seconds())
    # an observation's support is its event time; a commitment's the event of its source
    assert _item(pack, PROMISE).seconds_since_support == promised
    assert _item(pack, BOOK).provenance_ids == (PROMISE,)
    assert _item(pack, BOOK).seconds_since_support == promised
    # measured to as_of in an as_of view
    view = await _recall(memory, as_of=PROMISED + timedelta(days=1, seconds=30))
    assert _item(view, BOOK).seconds_since_support == 86_430
    data = pack.to_dict()
    assert {tuple(i["admitted_by"]) for i in data["items"]} == {("topic",)}
    assert data["last_interactions"] == [] and data["scene_resolutions"] == []


async def test_a_given_belief_is_supported_when_recorded_and_a_future_event_not_yet() -> None:
    memory = _memory(ME)
    try:
        await memory.remember(
            RememberDrafts(
                entities=[EntityDraft(id=ANA, entity_type="person", created_at=PROMISED)],
                episodes=[
                    EpisodeDraft(
                        summary="Ana's concert in the old theatre.", occurred_at=T0 + timedelta(days=3)
                    )
                ],
                derived=[
                    DerivedMemoryDraft(
                        DerivedType.USER_PREFERENCE,
                        "Ana likes concerts in the old theatre.",
                        entity_ids=[ANA],
                        given_by_application=True,
                        created_at=PROMISED,
                    )
                ],
            )
        )
        pack = await memory.retrieve("Ana's concert in the old theatre")
    finally:
        await memory.close()
    by_type = {item.object_type.value: item for item in pack.items}
    assert by_type["episode"].seconds_since_support is None  # it has not happened yet
    assert by_type["derived"].seconds_since_support == int((T0 - PROMISED).total_seconds())


async def test_a_thread_is_supported_by_its_newest_member(memory: CharacterMemory) -> None:
    thread = MemoryId.deterministic("obligations", "thread")
    await memory.remember(
        RememberDrafts(
            threads=[ThreadDraft(title="Borrowed books", id=thread, created_at=T0 - timedelta(hours=1))],
            links=[LinkDraft(BOOK, Relation.PART_OF_THREAD, thread, recorded_at=T0 - timedelta(hours=1))],
        )
    )
    pack = await memory.retrieve("Borrowed books")
    # the commitment is its only member; a derived member counts by its event time (record time)
    assert _item(pack, thread).seconds_since_support == int((T0 - RECORDED).total_seconds())


def test_direction_and_settlement_rules_are_pure() -> None:
    from charmem.domain.model import DerivedMemory, MemoryLink
    from charmem.domain.obligations import obligation_direction, settled_by

    promise = DerivedMemory(
        id=BOOK,
        derived_type=DerivedType.COMMITMENT,
        text="Return the book.",
        entity_ids=[ME, ANA],
        observation_ids=[PROMISE],
        assertions=[BeliefAssertion(ME, Actor()), BeliefAssertion(ANA, Counterpart())],
        created_at=PROMISED,
    )
    note = attrs.evolve(promise, derived_type=DerivedType.CLAIM, assertions=[])
    assert obligation_direction(promise, ME) is ObligationDirection.OWED_BY_CHARACTER
    assert obligation_direction(promise, ANA) is ObligationDirection.OWED_TO_CHARACTER
    assert obligation_direction(promise, None) is None
    assert obligation_direction(note, ME) is None
    links = [
        MemoryLink(
            id=MemoryId.new(),
            from_id=RETURNED,
            relation=Relation.FULFILLS_COMMITMENT,
            to_id=BOOK,
            created_at=KEPT,
        ),
        MemoryLink(id=MemoryId.new(), from_id=ASK, relation=Relation.RESOLVES, to_id=BOOK, created_at=KEPT),
        MemoryLink(
            id=MemoryId.new(), from_id=PHOTOS, relation=Relation.SUPPORTS, to_id=BOOK, created_at=KEPT
        ),
        MemoryLink(
            id=MemoryId.new(), from_id=BOOK, relation=Relation.RESOLVES, to_id=PHOTOS, created_at=KEPT
        ),
    ]
    assert settled_by(promise, links) == tuple(sorted((RETURNED, ASK)))
    assert settled_by(promise, links, as_of=KEPT - timedelta(seconds=1)) == ()
    assert settled_by(note, links) == ()  # no obligation: its links are ordinary links


@pytest.mark.parametrize("budget", [6, 12, 40])
async def test_the_qualifiers_count_in_the_render_budget(memory: CharacterMemory, budget: int) -> None:
    await _keep_the_promise(memory)
    pack = await _recall(memory)
    rendered = pack.render(max_tokens=budget)
    assert len(rendered) <= 4 * budget
    assert pack.token_counter is not None
    assert pack.token_counter.count(rendered) <= budget
    for line in rendered.splitlines():  # every memory line keeps its whole parenthesis
        head = line.split(": ", 1)[0] if line.startswith("- ") else ""
        assert head.count("(") == head.count(")")
