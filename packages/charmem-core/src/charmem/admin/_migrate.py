"""``migrate``: move a collection's stores, in place, to the layouts this charmem writes.

A store adapter may change how it lays data out (the Oxigraph adapter's compact layout, the
Qdrant service's shared collections). Opening a store of an older layout is refused with
:class:`~charmem.errors.StoreLayoutError`; :func:`migrate` asks the adapter of
``GRAPH_STORE_MODE``, then the adapter of ``VECTOR_STORE_MODE``, to move it (each factory's
optional ``migrate(settings, collection)``). Statistics are not touched: they hold ids, which a
layout change keeps.
"""

from __future__ import annotations

from typing import Any

import attrs

from charmem.composition import load_factory
from charmem.log import get_logger
from charmem.settings import Settings, validate_collection_name

__all__ = ["LayoutMigration", "VectorLayoutMigration", "migrate"]

_log = get_logger("charmem.admin.migrate")


@attrs.frozen(kw_only=True)
class VectorLayoutMigration:
    """What one :func:`migrate` did to a collection's vector index.

    Attributes:
        collection: the collection migrated.
        source: where its points were (``None``: nothing to move, already in the current layout).
        target: where they are now (``None`` when nothing was moved).
        layout: the layout the vectors are in now (the adapter's name, e.g. ``shared``).
        points: points moved (0: nothing to do).
        seconds: wall-clock time of the move.
    """

    collection: str
    source: str | None
    target: str | None
    layout: str
    points: int
    seconds: float

    def to_dict(self) -> dict[str, Any]:
        """The report as plain JSON types."""
        return attrs.asdict(self)


@attrs.frozen(kw_only=True)
class LayoutMigration:
    """What one :func:`migrate` did.

    Attributes:
        collection: the collection migrated.
        store: where its graph store is (a path or an endpoint).
        found: the layout version found (``None``: an older store without a version record, or
            an empty one).
        layout: the layout version the store is in now.
        objects: objects, links and lifecycle records rewritten (0: nothing to do).
        seconds: wall-clock time of the migration.
        unreadable: the stored nodes (IRIs or ids) that did not decode in the older layout and
            were left as they were; ``charmem check`` reports them as unreadable (empty: none).
        vectors: what was done to the vector index (``None``: its adapter has a single layout).
            A graph store with a single layout is reported as layout 1, found 1, 0 objects.
    """

    collection: str
    store: str
    found: int | None
    layout: int
    objects: int
    seconds: float
    unreadable: tuple[str, ...] = ()
    vectors: VectorLayoutMigration | None = None

    def to_dict(self) -> dict[str, Any]:
        """The report as plain JSON types."""
        return attrs.asdict(self)


async def migrate(settings: Settings, collection: str) -> LayoutMigration | None:
    """Move the graph store, then the vector index, of ``collection`` to the current layouts.

    Crash-safe and idempotent (the adapters' promise): running it again after an interruption
    finishes the job; running it on current stores changes nothing.

    Args:
        settings: ``GRAPH_STORE_MODE``, ``VECTOR_STORE_MODE`` and the stores' location keys.
        collection: the collection name.

    Returns:
        LayoutMigration | None: the report (the vector index's in ``vectors``), or ``None`` when
        both adapters have a single layout (nothing to migrate).

    Raises:
        ConfigurationError: the collection name or a setting is not valid.
        StoreLayoutError: the store records a newer layout than this charmem knows.
        StoreLockedError: another process holds the store.
        DimensionMismatchError, EmbedderMismatchError: the vectors to move were made by another
            embedder than vectors the collection already has in the target layout.
        BackendError: a store failed (what was moved stays moved; run it again).
    """
    validate_collection_name(collection)
    report = await _migrate_graph(settings, collection)
    vectors = await _migrate_vectors(settings, collection)
    if vectors is None:
        return report
    if report is None:
        report = LayoutMigration(
            collection=collection,
            store=f"the {settings.graph_store_mode} graph store",
            found=1,
            layout=1,
            objects=0,
            seconds=0.0,
        )
    return attrs.evolve(report, vectors=vectors)


async def _migrate_graph(settings: Settings, collection: str) -> LayoutMigration | None:
    """The graph store's migration hook, or ``None`` when it has a single layout."""
    factory = load_factory("graph", settings.graph_store_mode)
    hook = getattr(factory, "migrate", None)
    if hook is None:
        return None
    report: LayoutMigration | None = await hook(settings, collection)
    if report is not None:
        _log.info(
            "graph_layout_migrated",
            collection=collection,
            objects=report.objects,
            seconds=report.seconds,
            unreadable=len(report.unreadable),
        )
    return report


async def _migrate_vectors(settings: Settings, collection: str) -> VectorLayoutMigration | None:
    """The vector index's migration hook, or ``None`` when it has a single layout."""
    factory = load_factory("vectors", settings.vector_store_mode)
    hook = getattr(factory, "migrate", None)
    if hook is None:
        return None
    report: VectorLayoutMigration | None = await hook(settings, collection)
    if report is not None:
        _log.info(
            "vector_layout_migrated",
            collection=collection,
            points=report.points,
            layout=report.layout,
            seconds=report.seconds,
        )
    return report
