"""Occasions in one query: the episodes a scene brings to mind by who, where and when.

:func:`occasions_query` is the SPARQL of :meth:`charmem.ports.OccasionReader.occasions` over the
compact layout: an episode's ``occurredAt`` triple, its ``involves`` link nodes, its scene's
``settingKey`` and custom-value nodes. IRIs are checked by :func:`charmem_oxigraph._vocab.iri_ref`;
the setting key, custom key and value (memory text) and the instants are serialised by
pyoxigraph's :class:`~pyoxigraph.Literal`, never pasted. Month, day and year are SPARQL's
``MONTH``/``DAY``/``YEAR`` of the ``xsd:dateTime``, which read its own (local) fields.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from charmem.domain.occasions import Occasion, OccasionQuery, occasion_order
from pyoxigraph import Literal, NamedNode

from charmem_oxigraph import _vocab as v

__all__ = ["occasions_from_rows", "occasions_query"]

_XSD_DATETIME = NamedNode(v.XSD + "dateTime")


def _p(local_name: str) -> str:
    return v.iri_ref(v.VOCAB + local_name)


def _instant(value: datetime) -> str:
    return str(Literal(value.isoformat(), datatype=_XSD_DATETIME))


def occasions_query(graph: str, query: OccasionQuery) -> str:
    """``?e`` (episode node) and ``?t`` (its ``occurredAt``) of the episodes meeting ``query``.

    Newest first, then by node IRI (the id's text, as :func:`~charmem.domain.occasions.occasion_order`),
    at most ``query.limit`` rows.
    """
    patterns = []
    if query.participant is not None:
        notion = v.iri_ref(v.node_iri("entity", query.participant))
        patterns.append(
            f"?l {_p('to')} {notion} . ?l {_p('relation')} {_p('involves')} . ?l {_p('from')} ?e ."
        )
    if query.participant_name is not None:
        name = Literal(query.participant_name)
        patterns.append(f"?e {_p(v.SCENE_PARTICIPANT)} ?n . ?n {_p(v.PARTICIPANT_NAME_KEY)} {name} .")
    if query.setting_key is not None:
        patterns.append(f"?e {_p(v.SETTING_KEY)} {Literal(query.setting_key)} .")
    if query.custom_value is not None:
        key, value = query.custom_value
        patterns.append(
            f"?e {_p(v.SCENE_CUSTOM)} ?c . ?c {_p(v.CUSTOM_KEY)} {Literal(key)} . "
            f"?c {_p(v.CUSTOM_VALUE)} {Literal(value)} ."
        )
    patterns.append(f"?e {_p('occurredAt')} ?t .")  # after the bound patterns: they are selective
    filters = []
    if query.at_or_before is not None:
        filters.append(f"?t <= {_instant(query.at_or_before)}")
    if query.between is not None:
        filters.append(f"?t >= {_instant(query.between[0])} && ?t <= {_instant(query.between[1])}")
    if query.month_day is not None:
        month, day = query.month_day
        filters.append(f"MONTH(?t) = {int(month)} && DAY(?t) = {int(day)}")
    if query.before_year is not None:
        filters.append(f"YEAR(?t) < {int(query.before_year)}")
    where = " ".join(patterns) + "".join(f" FILTER({condition})" for condition in filters)
    return (
        f"SELECT DISTINCT ?e ?t WHERE {{ GRAPH {v.iri_ref(graph)} {{ {where} }} }} "
        f"ORDER BY DESC(?t) STR(?e) LIMIT {int(query.limit)}"
    )


def occasions_from_rows(rows: Iterable[Any]) -> list[Occasion]:
    """The :class:`~charmem.domain.occasions.Occasion` of each row, in the port's order."""
    found = [
        Occasion(v.memory_id_of(row["e"].value), datetime.fromisoformat(str(row["t"].value))) for row in rows
    ]
    return sorted(found, key=occasion_order)
