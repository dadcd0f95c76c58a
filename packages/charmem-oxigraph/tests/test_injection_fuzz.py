"""Memory text and names can never change a SPARQL query or update: fuzzed, in every mode.

Embedded (in-memory and persistent pyoxigraph) and the SPARQL 1.1 service adapter against a real
``oxigraph serve`` and a real Virtuoso 7 (when installed; see conftest). Each example writes one
whole world (every object type, links, lifecycle records, ``KnownAs`` names) whose every text
field holds the drawn hostile text (any Unicode plane, NUL, quotes, ``\"\"\"``, backslashes,
braces, ``<``/``>``, ``#``, newlines, ``U+2028``, pieces of SPARQL such as
``" } ; DROP ALL ; #``) into a fresh collection, and checks:

* the collection holds exactly as many statements as the same world with plain text (no triple
  was injected, none was lost);
* a canary collection on the same store, and the store's default graph (on Virtuoso, whose
  default graph is the union of all graphs: every graph but the test's own), are untouched;
* everything reads back equal, names and rationales byte-identical.

Ids never carry caller text into SPARQL: they are UUIDs (anything else is a ``DraftValidationError``)
and every IRI passes ``iri_ref``'s allow-list.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from charmem import CharmemError, DraftValidationError, MemoryId
from charmem.domain.graph import GraphBatch, LifecycleRecord
from charmem.domain.model import DerivedType, MemoryLink, MemoryObject, Relation
from charmem.domain.scene import Scene, SceneParticipant, SceneSetting
from charmem.errors import BackendError
from charmem_contract.strategies import MiB, fuzz_settings, memory_texts
from hypothesis import example, given
from hypothesis import strategies as st
from pyoxigraph import DefaultGraph

from charmem_oxigraph import OxigraphGraphStore, SparqlServiceGraphStore
from charmem_oxigraph import _vocab as v
from charmem_oxigraph.testing import OxigraphServer, VirtuosoServer

from oxigraph_builders import SEOUL, at, derived, entity, episode, known_as, link, observation, record, thread

_collections = itertools.count()
INJECTIONS = (
    '" } ; DROP ALL ; #',
    '"""',
    '\\"',
    '\\" } } ; CLEAR ALL ; INSERT DATA { <urn:a> <urn:b> <urn:c> } #',
    "'''",
    "> <urn:x> . <urn:y",
    "<urn:charmem:collection:canary>",
    '" . GRAPH <urn:charmem:collection:canary> { ?s ?p ?o } . "',
    '"^^<http://www.w3.org/2001/XMLSchema#integer> . <urn:a> <urn:b> "',
    "\\u0022 } ; DROP ALL ; #",
    '"@en ; DELETE WHERE { ?s ?p ?o } #',
)


def world(text: str) -> tuple[list[MemoryObject], list[MemoryLink], list[LifecycleRecord]]:
    """One object of each type, links and records, with ``text`` in every text field (the scene's too)."""
    person, place = entity(entity_type=text), entity(entity_type="place")
    arc = thread(title=text, summary=text)
    # A 1 MiB text goes into two scene fields only: the episode's record holds each copy, and a
    # read over SPARQL JSON results takes one literal of at most 16 MiB (pyoxigraph's parser).
    more = text if len(text) < 4096 else "plain words"
    occasion = Scene(
        at=at(-60, SEOUL),
        participants=[SceneParticipant(entity_id=person.id, name=text), SceneParticipant(description=more)],
        setting=SceneSetting(key=text, words=more),
        custom_values={more: more},
    )
    ep = episode(
        summary=text,
        participant_entity_ids=[person.id],
        thread_ids=[arc.id],
        raw_ref=text,
        occurred_at=occasion.at,
        scene=occasion,
    )
    obs = observation(
        ep.id, text=text, raw_ref=text, speaker_entity_id=person.id, mentioned_entity_ids=[place.id]
    )
    belief = derived(
        derived_type=DerivedType.CLAIM,
        text=text,
        observation_ids=[obs.id],
        entity_ids=[person.id, place.id],
        assertions=[known_as(person.id, text), known_as(place.id, f"{text} {text}")],
    )
    links = [
        link(obs.id, Relation.ASSOCIATED_WITH, arc.id, rationale=text),
        link(belief.id, Relation.ABOUT, place.id),
    ]
    records = [record(belief.id, rationale=text, external_refs=[text])]
    return [person, place, arc, ep, obs, belief], links, records


@pytest.fixture(scope="module")
def persistent_path(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A persistent store kept open for the module (examples open collections of it)."""
    path = tmp_path_factory.mktemp("injection") / "oxigraph"
    keeper = OxigraphGraphStore.open("keeper", path=path)
    try:
        yield path
    finally:
        asyncio.run(keeper.close())


@pytest.fixture(scope="module", params=["in_memory", "persistent", "service", "virtuoso"])
def opener(request: pytest.FixtureRequest, persistent_path: Path) -> Any:
    """``opener(collection)``: a coroutine opening ``collection`` (and a sibling, ``canary``)."""
    mode = request.param
    if mode in ("service", "virtuoso"):
        fixture = "sparql_server" if mode == "service" else "virtuoso_server"
        server: OxigraphServer | VirtuosoServer = request.getfixturevalue(fixture)

        async def service(collection: str) -> tuple[Any, Any]:
            def make(name: str) -> SparqlServiceGraphStore:
                return SparqlServiceGraphStore(
                    name, query_endpoint=server.query_endpoint, update_endpoint=server.update_endpoint
                )

            return make(collection), make(f"{collection}-canary")

        return service

    async def embedded(collection: str) -> tuple[Any, Any]:
        store = await OxigraphGraphStore.open_async(
            collection, path=persistent_path if mode == "persistent" else None
        )
        return store, store.for_collection(f"{collection}-canary")

    return embedded


async def _outside_size(store: Any, own: list[str]) -> int:
    """Statements of the default graph, or on Virtuoso (``/sparql``) of every graph but ``own``."""
    if isinstance(store, SparqlServiceGraphStore):
        query = "SELECT (COUNT(*) AS ?n) WHERE { ?s ?p ?o }"
        if store.query_endpoint.endswith("/sparql"):  # Virtuoso: the default graph is every graph
            others = ", ".join(v.iri_ref(graph) for graph in own)
            query = (
                f"SELECT (COUNT(*) AS ?n) WHERE {{ GRAPH ?g {{ ?s ?p ?o }} FILTER(?g NOT IN ({others})) }}"
            )
        rows = await store._select(query, "count the statements outside the test's graphs")
        return int(rows[0]["n"].value)
    return len(list(store._handle().store.quads_for_pattern(None, None, None, DefaultGraph())))


async def _write_and_check(opener: Any, text: str) -> None:
    name = f"inj-{next(_collections)}"
    store, canary = await opener(name)
    plain_store, plain_canary = await opener(f"{name}-plain")
    try:
        sentinel = entity(entity_type='canary " } #')
        await canary.write_batch(GraphBatch(objects=[sentinel]))
        canary_count = await canary.statement_count()
        own = [graph.graph_iri for graph in (store, canary, plain_store, plain_canary)]
        default_before = await _outside_size(store, own)

        objects, links, records = world(text)
        try:
            await store.write_batch(GraphBatch(objects=objects, links=links, records=records))
        except BackendError as exc:  # Virtuoso refuses a request over 10 MB (README, "Virtuoso")
            if "HT057" not in str(exc) and "SR578" not in str(exc):
                raise
            assert await store.statement_count() == 0, "a refused write must leave nothing"
            return
        plain = world("plain words")
        await plain_store.write_batch(GraphBatch(objects=plain[0], links=plain[1], records=plain[2]))

        assert await store.statement_count() == await plain_store.statement_count(), (
            "hostile text changed the number of statements written"
        )
        assert await canary.statement_count() == canary_count
        assert await canary.get_objects([sentinel.id]) == {sentinel.id: sentinel}
        assert await _outside_size(store, own) == default_before

        read = await store.get_objects([obj.id for obj in objects])
        assert read == {obj.id: obj for obj in objects}
        assert await store.get_links([item.id for item in links]) == {item.id: item for item in links}
        assert await store.get_records([records[0].target_id]) == records
        names = {name for _belief, _subject, name in await store.name_assertions()}
        assert names == {text, f"{text} {text}"}
    finally:
        for graph in (store, canary, plain_store, plain_canary):
            await graph.close()


def test_injection_attempts_stay_data(opener: Any) -> None:
    async def every_attempt() -> None:
        for text in INJECTIONS:
            await _write_and_check(opener, text)

    asyncio.run(every_attempt())


@fuzz_settings(6)
@given(text=memory_texts(huge=False))
@example(text=('"""} ; DROP ALL ; #\x00\u2028' * (MiB // 16 + 1))[:MiB])  # 1 MiB through one update
def test_fuzzed_text_stays_data(opener: Any, text: str) -> None:
    asyncio.run(_write_and_check(opener, text))


@fuzz_settings(200)
@given(raw=st.text() | st.from_regex(r"[0-9a-f-]{36}", fullmatch=True) | st.sampled_from(INJECTIONS))
def test_ids_are_uuids_or_refused(raw: str) -> None:
    """An id from caller text is a canonical UUID or a DraftValidationError; IRIs stay safe."""
    try:
        memory_id = MemoryId(raw)
    except DraftValidationError:
        return
    except CharmemError as exc:  # pragma: no cover - the assertion explains
        pytest.fail(f"an id raised {type(exc).__name__}, not DraftValidationError")
    for kind in v.NODE_KINDS:
        iri = v.node_iri(kind, memory_id)
        assert v.iri_ref(iri) == f"<{iri}>"


@pytest.mark.parametrize(
    "hostile", ["urn:charmem:x> } ; DROP ALL ; #", "urn:a b", 'urn:"', "urn:\u2028", "urn:x\x00"]
)
def test_iri_ref_refuses_anything_outside_its_alphabet(hostile: str) -> None:
    with pytest.raises(ValueError, match="refusing"):
        v.iri_ref(hostile)
