"""The check of a graph dump before a restore writes it: loaded, upgraded and read in a scratch store.

Both transports restore through :func:`staged_dump`, so a dump is refused for what a read of the
restored collection would refuse (the same plans and codec), before anything is written. The
whole dump is held in memory twice meanwhile (the quads and the scratch store).
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any, BinaryIO, TypeVar, cast

import attrs
from charmem.errors import BackupFormatError
from pyoxigraph import NamedNode, Quad, QuerySolutions, RdfFormat, Store, parse

from charmem_oxigraph import _layout as lay
from charmem_oxigraph import _writing as wr
from charmem_oxigraph._cache import GraphCache
from charmem_oxigraph._codec import CorruptNodeError
from charmem_oxigraph._reads import GraphReader

__all__ = ["StagedDump", "staged_dump"]

T = TypeVar("T")


@attrs.frozen
class StagedDump:
    """A dump checked by :func:`staged_dump`.

    Attributes:
        quads: what to write: the dump's statements, upgraded to the current layout.
        statements: statements the dump held (count; the backup manifest's count).
    """

    quads: list[Quad]
    statements: int


def staged_dump(source: BinaryIO, graph: NamedNode) -> StagedDump:
    """Parse a collection's N-Quads dump, upgrade it to the current layout and decode every node.

    Blocking (a worker thread's job); writes nothing but a scratch in-memory store.

    Args:
        source: the dump's bytes, read to the end.
        graph: the collection's named graph (every quad must be in it).

    Returns:
        StagedDump: the quads to write and the dump's statement count.

    Raises:
        BackupFormatError: the bytes are not N-Quads, a quad is in another graph, the recorded
            layout version is one this charmem does not read, or a node does not decode (the
            message names it).
    """
    try:
        quads = list(wr.check_dump(parse(source, RdfFormat.N_QUADS), graph))
    except SyntaxError as exc:
        raise BackupFormatError(f"the graph dump is not valid N-Quads: {exc}") from exc
    scratch = Store()
    scratch.extend(quads)

    def select(query: str) -> list[Any]:
        # The solutions object must die in this thread (pyoxigraph's are unsendable): a frame of
        # its own, so a plan's exception does not carry it to another thread.
        answer = scratch.query(query)
        if not isinstance(answer, QuerySolutions):  # pragma: no cover - plans SELECT
            raise TypeError("expected SELECT solutions")
        return list(answer)

    def drive(plan: Generator[str, list[Any], T]) -> T:
        try:
            query = next(plan)
            while True:
                query = plan.send(select(query))
        except StopIteration as done:
            return cast(T, done.value)

    try:
        lay.migrate_in_place(drive, scratch.update, graph.value, store="the backup", migrate_hint="")
        drive(GraphReader(GraphCache(coherent=True), graph.value).every_item())
    except CorruptNodeError as exc:
        raise BackupFormatError(
            f"the backup holds a node that does not decode ({exc}): it would restore a collection "
            "that cannot be read, so nothing was written; restore another copy"
        ) from exc
    return StagedDump(list(scratch.quads_for_pattern(None, None, None, graph)), len(quads))
