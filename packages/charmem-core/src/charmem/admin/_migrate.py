"""``migrate``: upgrade a collection's graph store, in place, to the layout this charmem writes.

A graph store adapter may change how it lays data out (the Oxigraph adapter's compact layout).
Opening a store of an older layout is refused with :class:`~charmem.errors.StoreLayoutError`;
:func:`migrate` asks the adapter of ``GRAPH_STORE_MODE`` to rewrite it (the factory's optional
``migrate(settings, collection)``). Vectors and statistics are not touched: they hold ids, which
a layout change keeps.
"""

from __future__ import annotations

from typing import Any

import attrs

from charmem.composition import load_factory
from charmem.log import get_logger
from charmem.settings import Settings, validate_collection_name

__all__ = ["LayoutMigration", "migrate"]

_log = get_logger("charmem.admin.migrate")


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
    """

    collection: str
    store: str
    found: int | None
    layout: int
    objects: int
    seconds: float
    unreadable: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """The report as plain JSON types."""
        return attrs.asdict(self)


async def migrate(settings: Settings, collection: str) -> LayoutMigration | None:
    """Upgrade the graph store of ``collection`` to the current layout, in place.

    Crash-safe and idempotent (the adapter's promise): running it again after an interruption
    finishes the job; running it on a current store changes nothing.

    Args:
        settings: ``GRAPH_STORE_MODE`` and the store's location keys.
        collection: the collection name.

    Returns:
        LayoutMigration | None: the report, or ``None`` when the adapter has a single layout
        (nothing to migrate).

    Raises:
        ConfigurationError: the collection name or a setting is not valid.
        StoreLayoutError: the store records a newer layout than this charmem knows.
        StoreLockedError: another process holds the store.
        BackendError: the store failed (what was rewritten stays rewritten; run it again).
    """
    validate_collection_name(collection)
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
