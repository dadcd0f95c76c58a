"""One writer at a time per collection across processes on a SPARQL server: the writer lease.

A SPARQL 1.1 server offers no conditional update that holds between processes: on ``oxigraph
serve`` two guarded inserts (``INSERT ... WHERE { FILTER NOT EXISTS ... }``) from racing writers
both succeed (write skew). The lease is therefore built from what such a server does promise: an
update request is applied atomically, and a query sent after an update's answer sees it.

* **Acquire**: read the claims in the collection's writers graph
  (``urn:charmem:writers:<collection>``, one triple per claim:
  ``<urn:charmem:writer:TOKEN> vocab:leaseExpires "instant"``). While another claim is live (its
  expiry is ahead of this clock), wait. Otherwise, in one update request, delete the expired
  claims and insert this writer's claim; then read the claims again. Hold the lease only if no
  other live claim is there; else withdraw the claim and try again after a random pause.
* **Why at most one holder**: of two writers A and B holding at once, say A's claim was stored
  first. B read the claims after storing its own, so after A's: B saw A's claim and withdrew,
  unless A's claim was gone, which only happens when A released it (A no longer holds) or when
  its expiry passed (A's lease ran out: see fencing). No step relies on a guarded update.
* **Fencing**: a holder writes only while its lease has at least ``timeout`` seconds left by its
  own monotonic clock (counted from before its claim was sent), so a request it sends ends (or
  times out) before the claim expires. After the write it reads its claim back: still there means
  no other writer deleted it, so any later holder acquired after this write and validates against
  it. Gone (a holder paused longer than the lease, or clocks further apart than the margin)
  means another writer may have validated without it: the write is stored, and the error says
  to run ``charmem check --repair``.
* **Release**: delete the claim (one update). A holder that dies leaves its claim until it
  expires; the next writer then deletes it.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import random
import time
import uuid
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextvars import ContextVar
from datetime import UTC, datetime, timedelta
from types import MappingProxyType
from typing import Any, Final

import attrs
from charmem.errors import BackendError
from charmem.log import get_logger
from pyoxigraph import Literal, NamedNode

from charmem_oxigraph import _vocab as v

__all__ = [
    "LEASE_POLICY",
    "Lease",
    "LeasePolicy",
    "WriterLeases",
    "acquire",
    "claims_query",
    "live_claims",
    "write_lock",
    "writers_graph",
]

_log = get_logger("charmem_oxigraph.service")

# One writer lock per (event loop, update endpoint, graph): every store object of a collection in
# this process serialises its check-then-write on it. asyncio locks belong to one loop.
_WRITE_LOCKS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[tuple[str, str], asyncio.Lock]] = (
    weakref.WeakKeyDictionary()
)


def write_lock(update_endpoint: str, graph: str) -> asyncio.Lock:
    """This process's writer lock of a collection on a server (of the running event loop)."""
    locks = _WRITE_LOCKS.setdefault(asyncio.get_running_loop(), {})
    return locks.setdefault((update_endpoint, graph), asyncio.Lock())


_EXPIRES: Final = v.VOCAB + "leaseExpires"
_WRITER_PREFIX: Final = "urn:charmem:writer:"
_DATETIME: Final = NamedNode(v.XSD + "dateTime")


@attrs.frozen(kw_only=True)
class LeasePolicy:
    """How long a writer lease lasts and how a waiting writer polls.

    Attributes:
        seconds: a claim's lifetime (seconds, wall clock), at least ``requests_per_lease`` times
            the store's request timeout: the longest a dead holder blocks the collection.
        requests_per_lease: request timeouts a lease spans at least (a check-then-write takes a few
            requests; the last one must end before the claim expires).
        clock_margin: seconds of clock difference between writers' machines the lease tolerates
            (NTP keeps them far closer).
        first_pause, max_pause: seconds a writer waits between tries (random, doubling up to
            ``max_pause``): short, since a held lease spans a few requests on a local network.
        wait_leases: how many lease lifetimes a writer waits for the lease before giving up (a
            dead holder's claim expires within one).
    """

    seconds: float = 60.0
    requests_per_lease: int = 6
    clock_margin: float = 5.0
    first_pause: float = 0.002
    max_pause: float = 0.05
    wait_leases: float = 2.0

    def lifetime(self, timeout: float) -> float:
        """A claim's lifetime for a store whose requests take at most ``timeout`` seconds."""
        return max(self.seconds, self.requests_per_lease * timeout)


#: The lease of every SPARQL service store.
LEASE_POLICY: Final = LeasePolicy()


def writers_graph(collection_graph: str) -> str:
    """``urn:charmem:writers:<name>``: the named graph of a collection's writer claims.

    Kept apart from the collection's graph, so claims are never exported, counted or read as data.
    """
    return collection_graph.replace("urn:charmem:collection:", "urn:charmem:writers:", 1)


def claims_query(graph: str) -> str:
    """Every claim of ``graph`` (a writers graph) as ``?w`` (writer IRI) and ``?e`` (expiry)."""
    return f"SELECT ?w ?e WHERE {{ GRAPH {v.iri_ref(graph)} {{ ?w {v.iri_ref(_EXPIRES)} ?e }} }}"


def _claim_line(writer: str, expires: str) -> str:
    return f"{v.iri_ref(writer)} {v.iri_ref(_EXPIRES)} {Literal(expires, datatype=_DATETIME)} ."


def _update(graph: str, delete: Sequence[str], insert: Sequence[str]) -> str:
    g = v.iri_ref(graph)
    operations = [f"DELETE DATA {{ GRAPH {g} {{ {' '.join(delete)} }} }}"] if delete else []
    operations += [f"INSERT DATA {{ GRAPH {g} {{ {' '.join(insert)} }} }}"] if insert else []
    return " ;\n".join(operations)


def live_claims(rows: Sequence[Any], now: datetime) -> tuple[set[str], list[str]]:
    """Split claims rows (:func:`claims_query`) into live writers and expired claim lines.

    Args:
        rows: ``(?w, ?e)`` rows.
        now: this writer's clock (UTC).

    Returns:
        tuple: (writer IRIs whose claim expires after ``now``, N-Triples lines of the expired
        claims); a claim whose expiry is not a valid instant counts as expired.
    """
    live: set[str] = set()
    expired: list[str] = []
    for writer, expires in rows:
        try:
            alive = datetime.fromisoformat(expires.value) > now
        except ValueError:
            alive = False
        if alive:
            live.add(writer.value)
        else:
            expired.append(_claim_line(writer.value, expires.value))
    return live, expired


Select = Callable[[str], Awaitable[Sequence[Any]]]
Update = Callable[[str], Awaitable[None]]


@attrs.define
class Lease:
    """A writer lease held on one collection (:func:`acquire`).

    Attributes:
        graph: the writers graph.
        writer: this holder's IRI, ``urn:charmem:writer:<uuid>``.
        line: the stored claim (N-Triples line).
        ends: monotonic instant (seconds) after which the claim may have expired.
        lapses: monotonic instant (seconds) at which the claim's lifetime ends.
        unsettled: a write under the lease failed without an answer (the server may still apply
            it): the claim is left to lapse instead of being released.
    """

    graph: str
    writer: str
    line: str
    ends: float
    lapses: float
    unsettled: bool = False

    def check_time(self, timeout: float, collection: str) -> None:
        """Refuse to send a write that might end after the claim expired.

        Raises:
            BackendError: fewer than ``timeout`` seconds are left; nothing was written.
        """
        if time.monotonic() + timeout > self.ends:
            raise BackendError(
                f"the writer lease of collection {collection!r} runs out before a write could end "
                f"(a check-then-write took longer than the lease); nothing was written: try again"
            )

    async def confirm(self, select: Select, collection: str) -> None:
        """After a write: check that no other writer took the lease meanwhile (one query).

        Raises:
            BackendError: the claim is gone: the write is stored, but another writer may have
                validated without it; ``charmem check --repair`` reports and settles what it broke.
        """
        rows = await select(claims_query(self.graph))
        if not any(writer.value == self.writer for writer, _ in rows):
            raise BackendError(
                f"the writer lease of collection {collection!r} was taken over while this process "
                "wrote (it was paused longer than the lease, or the writers' clocks disagree): the "
                "write is stored, but another writer may have checked its own without seeing it; run "
                "`charmem check --repair` on the collection"
            )

    async def release(self, update: Update) -> None:
        """Delete the claim (one update); a failure leaves it to expire."""
        await update(_update(self.graph, [self.line], []))


async def _claim(
    select: Select,
    update: Update,
    graph: str,
    writer: str,
    expired: list[str],
    lifetimes: tuple[float, float],
) -> Lease | None:
    """Store this writer's claim (deleting ``expired``), read the claims back: the lease, or ``None``.

    ``lifetimes``: (seconds the holder may use the lease, seconds the claim lives). ``None``:
    another writer claimed at the same moment, and this claim was withdrawn. A claim stored by a
    call that then fails or is cancelled is withdrawn too, so it holds no one off.
    """
    usable, lifetime = lifetimes
    started = time.monotonic()
    expires = (datetime.now(UTC) + timedelta(seconds=lifetime)).isoformat()
    lease = Lease(graph, writer, _claim_line(writer, expires), started + usable, started + lifetime)
    try:
        await update(_update(graph, expired, [lease.line]))
        others, _ = live_claims(await select(claims_query(graph)), datetime.now(UTC))
    except BaseException:
        withdraw = asyncio.ensure_future(lease.release(update))
        withdraw.add_done_callback(lambda done: done.cancelled() or done.exception())
        raise
    if others <= {writer}:
        return lease
    await lease.release(update)
    return None


async def acquire(
    select: Select,
    update: Update,
    *,
    graph: str,
    request_timeout: float,
    collection: str,
    policy: LeasePolicy = LEASE_POLICY,
) -> Lease:
    """Take the writer lease of a collection (see the module notes for why it is exclusive).

    Args:
        select: runs a SELECT query, returns its rows.
        update: sends one update request (applied atomically).
        graph: the collection's writers graph (:func:`writers_graph`).
        request_timeout: seconds one request may take (sets the claim's lifetime).
        collection: the collection name (for messages).
        policy: lifetime and polling.

    Returns:
        Lease: the held lease; release it with :meth:`Lease.release`.

    Raises:
        BackendError: the lease stayed taken for ``policy.wait_leases`` lifetimes (a live holder
            renewing it, or a claim dated far ahead), or the server failed.
    """
    lifetime = policy.lifetime(request_timeout)
    writer = f"{_WRITER_PREFIX}{uuid.uuid4()}"
    deadline = time.monotonic() + policy.wait_leases * lifetime
    pause = policy.first_pause
    while True:
        live, expired = live_claims(await select(claims_query(graph)), datetime.now(UTC))
        if not live:
            usable = lifetime - policy.clock_margin
            lease = await _claim(select, update, graph, writer, expired, (usable, lifetime))
            if lease is not None:
                return lease
        if time.monotonic() > deadline:
            raise BackendError(
                f"no writer lease on collection {collection!r} after {policy.wait_leases * lifetime:g} s: "
                "another process holds it; check that no writer is stuck"
            )
        await asyncio.sleep(random.uniform(0, pause))  # noqa: S311 - jitter, not a secret
        pause = min(2 * pause, policy.max_pause)


# The writer leases the running task holds, by (update endpoint, graph): set by
# ``WriterLeases.writing`` (and seen by the tasks it starts), so a write inside a use case's block
# uses the block's lease instead of waiting for it.
_HELD: ContextVar[Mapping[tuple[str, str], Lease]] = ContextVar(
    "charmem_sparql_leases", default=MappingProxyType({})
)

# When this process's writers of (update endpoint, graph) may write again after a write that failed
# without an answer (monotonic instant its lease's claim lapses): the server may still apply it.
_UNSETTLED: dict[tuple[str, str], float] = {}


@attrs.frozen(kw_only=True)
class WriterLeases:
    """The writer lease of one service store: taken, used for writes, released.

    Attributes:
        select: runs a SELECT query (text, action), returns its rows.
        update: sends one update request (text, action).
        lock: this process's writer lock of the collection (taken before the lease).
        key: (update endpoint, collection graph): which lease a task holds.
        timeout: seconds one request may take.
        collection: the collection name (for messages).
        policy: the lease's lifetime and polling (:data:`LEASE_POLICY`).
    """

    select: Callable[[str, str], Awaitable[Sequence[Any]]]
    update: Callable[[str, str], Awaitable[None]]
    lock: Callable[[], asyncio.Lock]
    key: tuple[str, str]
    timeout: float
    collection: str
    policy: LeasePolicy = LEASE_POLICY

    @contextlib.asynccontextmanager
    async def writing(self, action: str) -> AsyncIterator[Lease]:
        """The lease the running task holds, else this process's lock and a new lease.

        ``action`` (what the lease is for) names the step in the lease requests' errors.

        Raises:
            BackendError: the lease could not be had (:func:`acquire`).
        """
        held = _HELD.get().get(self.key)
        if held is not None:
            yield held
            return
        async with self.lock():
            lapses = _UNSETTLED.pop(self.key, None)
            if lapses is not None:  # a write of this process may still land until its claim lapses
                await asyncio.sleep(max(0.0, lapses - time.monotonic()))
            lease = await acquire(
                functools.partial(self._claims, action),
                functools.partial(self._lease_update, action),
                graph=writers_graph(self.key[1]),
                request_timeout=self.timeout,
                collection=self.collection,
                policy=self.policy,
            )
            token = _HELD.set(MappingProxyType({**_HELD.get(), self.key: lease}))
            try:
                yield lease
            finally:
                _HELD.reset(token)
                if lease.unsettled:
                    _UNSETTLED[self.key] = lease.lapses
                    _log.warning("sparql_lease_left_to_lapse", collection=self.collection, action=action)
                else:
                    await self._release(lease, action)

    async def fenced(self, lease: Lease, update: str, action: str) -> None:
        """Send ``update`` under ``lease``: only with time left on it, confirmed afterwards.

        A write that fails without an answer (a timeout, a lost connection, a cancellation) may
        still be applied by the server later: its lease is then left to lapse rather than
        released, and this process's next writer waits for that too, so no writer of any process
        checks a write of its own before the failed one has landed or can no longer land.

        Raises:
            BackendError: see :meth:`Lease.check_time` and :meth:`Lease.confirm`, or the server
                failed (the message says when writers of the collection may go on).
        """
        lease.check_time(self.timeout, self.collection)
        try:
            await self.update(update, action)
        except BaseException as exc:
            lease.unsettled = True
            if isinstance(exc, BackendError):
                wait = max(0.0, lease.lapses - time.monotonic())
                raise BackendError(
                    f"{exc}. The server may still apply this write: writers of collection "
                    f"{self.collection!r} wait until its writer lease lapses (within {wait:.0f} s); "
                    "then replay the same plan (equal content is accepted) or run `charmem check`"
                ) from exc
            raise
        await lease.confirm(functools.partial(self._claims, action), self.collection)

    async def _claims(self, action: str, query: str) -> Sequence[Any]:
        return await self.select(query, f"{action} (writer lease)")

    async def _lease_update(self, action: str, update: str) -> None:
        await self.update(update, f"{action} (writer lease)")

    async def _release(self, lease: Lease, action: str) -> None:
        """Release ``lease``, even when the task is cancelled meanwhile; a failure leaves it to expire."""
        release = asyncio.ensure_future(lease.release(functools.partial(self._lease_update, action)))
        try:
            await asyncio.shield(release)
        except asyncio.CancelledError:
            release.add_done_callback(lambda done: done.cancelled() or done.exception())
            raise
        except BackendError as exc:
            _log.warning("sparql_lease_not_released", collection=self.collection, error=str(exc)[:200])
