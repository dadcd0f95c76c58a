"""A graph that reads as empty beside vectors that hold points: a lost or misplaced graph.

The graph is the authority and the vectors are derived from it, so vectors holding points beside
a graph holding no statement of the collection are a sign that the graph read is not the one
that wrote them: ``SPARQL_ENDPOINTS`` reordered, a shard appended without pinning the
collections it moves, a mistyped SPARQL endpoint, or a graph really lost. Opening such a
collection would read it as empty, send new writes to the wrong server, and ``check --repair``
would then delete the good vectors; it is refused instead (:func:`refuse_vectors_beside_empty_graph`).
An embedded graph store that does not exist is refused earlier, by
:func:`charmem.usecases.maintenance.refuse_vectors_without_graph`; this check covers the graph
stores that cannot tell whether they exist (servers).
"""

from __future__ import annotations

import asyncio
from typing import Final

from charmem._placement import SPARQL_ENDPOINTS_KEY, shard_index
from charmem.composition import load_factory
from charmem.errors import StoreCorruptedError, mask_secrets
from charmem.ports import GraphStore, VectorIndex
from charmem.settings import Settings

__all__ = ["graph_location", "lost_graph_ways_out", "refuse_vectors_beside_empty_graph"]

#: Graph store modes that start empty at each open by design: an empty graph there is no sign.
_EPHEMERAL_GRAPH_MODES: Final = frozenset({"in_memory", "reference"})


def graph_location(settings: Settings, collection: str) -> str:
    """Where ``collection``'s graph is read, as messages name it (credentials masked).

    Returns:
        str: for ``GRAPH_STORE_MODE=service``, the SPARQL query endpoint and, with
        ``SPARQL_ENDPOINTS``, the shard index and whether it is pinned or hashed; else
        ``OXIGRAPH_PATH`` (persistent) or the mode.
    """
    if settings.graph_store_mode == "service":
        query = mask_secrets(settings.sparql_shard(collection).query)
        endpoints = settings.sparql_endpoints
        if endpoints is None:
            return f"the SPARQL endpoint {query} (SPARQL_QUERY_ENDPOINT)"
        index = shard_index(collection, len(endpoints.shards), endpoints.pinned)
        how = "pinned" if collection in endpoints.pinned else "placed by the hash of its name"
        return (
            f"the SPARQL endpoint {query} (shard {index} of {len(endpoints.shards)} in "
            f"{SPARQL_ENDPOINTS_KEY}, {how})"
        )
    if settings.graph_store_mode == "persistent":
        return f"the graph store at {settings.oxigraph_path} (OXIGRAPH_PATH)"
    return f"the graph store of GRAPH_STORE_MODE={settings.graph_store_mode}"


def lost_graph_ways_out(collection: str, *, service: bool) -> str:
    """The ways out of a graph that reads as empty beside vectors, for a refusal's message.

    Args:
        collection: the collection name.
        service: whether the graph is a SPARQL service (its settings, not a directory, place it).

    Returns:
        str: sentences to append to the refusal.
    """
    if service:
        place = (
            f"point the settings at the graph that holds it: restore {SPARQL_ENDPOINTS_KEY} as it "
            "was (shards are never reordered or removed; an appended shard moves the collections "
            f'it wins), or pin the collection to the shard that holds it ("pinned": '
            f'{{"{collection}": <shard index>}}), or fix a mistyped SPARQL_QUERY_ENDPOINT'
        )
    else:
        place = "restore the graph store (or point OXIGRAPH_PATH / --store at the right one)"
    return (
        f"Ways out: {place}; if the graph was really lost, restore a backup with `charmem import`; "
        "to drop these vectors deliberately, open with CharacterMemory.open(..., "
        "rebuild_vectors=True) (`charmem rebuild-vectors --drop`)"
    )


async def refuse_vectors_beside_empty_graph(
    settings: Settings, collection: str, graph: GraphStore, vectors: VectorIndex
) -> None:
    """Refuse to open a collection whose graph reads as empty while its vectors hold points.

    Only graph stores that cannot tell whether they exist (the factory's ``exists`` answers
    ``None``: servers) are checked here, and not those that start empty by design
    (``in_memory``). Costs one count of each store.

    Args:
        settings: the deployment settings.
        collection: the collection name.
        graph: the collection's graph store, open.
        vectors: the collection's vector index, open.

    Raises:
        StoreCorruptedError: the graph holds no statement of the collection while the vector
            index holds points; the message names the graph read, the points and the ways out.
    """
    if settings.graph_store_mode in _EPHEMERAL_GRAPH_MODES:
        return
    factory = load_factory("graph", settings.graph_store_mode)
    if await asyncio.to_thread(factory.exists, settings, collection) is not None:
        return  # a store that can tell was checked before it was opened
    if await graph.statement_count():
        return
    points = await vectors.count()
    if not points:
        return
    where = graph_location(settings, collection)
    raise StoreCorruptedError(
        f"collection {collection!r} reads as empty from {where}, but its vector index "
        f"(VECTOR_STORE_MODE={settings.vector_store_mode}) holds {points} points: this graph is "
        "not the one that wrote them, so nothing was opened (opening would read the collection "
        "as empty, write to the wrong server, and a repair would delete the vectors). "
        + lost_graph_ways_out(collection, service=settings.graph_store_mode == "service"),
        path=None,
    )
