"""Retrieval's domain: what to recall, how it is scored, and the continuity context pack.

The pack (:class:`ContinuityContextPack`) is defined here; its parts live beside it and every
public name is importable from this module:

* :mod:`charmem.domain.context`: the retrieval context and the bounds of expansion;
* :mod:`charmem.domain.scoring`: the scoring policy, score steps and the rank key;
* :mod:`charmem.domain.pack`: items, notions, omissions, currency, recall completeness;
* :mod:`charmem.domain.render`: the prompt text of a pack within a token budget.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

import attrs

from charmem.domain.context import (
    DEFAULT_SECTION_LIMITS,
    SECTION_OF_DERIVED_TYPE,
    GraphLimits,
    RetrievalContext,
)
from charmem.domain.ids import MemoryId
from charmem.domain.model import MemoryLink
from charmem.domain.pack import (
    DUPLICATE_TEXT,
    AdmissionRoad,
    CompletenessKind,
    CurrencyStatus,
    ItemTrace,
    LastInteraction,
    ObligationDirection,
    Omission,
    PackEntity,
    PackItem,
    SceneResolution,
    SceneResolutionStatus,
    VectorRecallCompleteness,
)
from charmem.domain.render import render_lines, same_text_key
from charmem.domain.scoring import DEFAULT_SCORING, SCORE_RESOLUTION, ScoringPolicy, rank_key, score_step
from charmem.errors import DraftValidationError
from charmem.tokens import WhitespaceTokenCounter

if TYPE_CHECKING:
    from charmem.ports import TokenCounter

__all__ = [
    "DEFAULT_SCORING",
    "DEFAULT_SECTION_LIMITS",
    "DUPLICATE_TEXT",
    "PACK_FORMAT_VERSION",
    "SCORE_RESOLUTION",
    "SECTION_OF_DERIVED_TYPE",
    "AdmissionRoad",
    "CompletenessKind",
    "ContinuityContextPack",
    "CurrencyStatus",
    "GraphLimits",
    "ItemTrace",
    "LastInteraction",
    "ObligationDirection",
    "Omission",
    "PackEntity",
    "PackItem",
    "RetrievalContext",
    "SceneResolution",
    "SceneResolutionStatus",
    "ScoringPolicy",
    "VectorRecallCompleteness",
    "rank_key",
    "same_text_key",
    "score_step",
]

#: Version of :meth:`ContinuityContextPack.to_dict` (2: items carry ``admitted_by``,
#: ``seconds_since_support``, ``direction`` and ``resolved_by``; the pack ``last_interactions``
#: and ``scene_resolutions``).
PACK_FORMAT_VERSION = 2

_NOT_REQUESTED = VectorRecallCompleteness(CompletenessKind.NOT_REQUESTED)


def _iso(value: datetime) -> str:
    return value.isoformat()


def _item_dict(item: PackItem) -> dict[str, Any]:
    return {
        "id": str(item.id),
        "object_type": item.object_type.value,
        "text": item.text,
        "occurred_at": _iso(item.occurred_at),
        "score": item.score,
        "signals": list(item.signals),
        "status": item.status.value,
        "provenance_ids": [str(i) for i in item.provenance_ids],
        "derived_type": item.derived_type.value if item.derived_type else None,
        "entity_ids": [str(i) for i in item.entity_ids],
        "admitted_by": [road.value for road in item.admitted_by],
        "seconds_since_support": item.seconds_since_support,
        "direction": item.direction.value if item.direction else None,
        "resolved_by": [str(i) for i in item.resolved_by],
        "trace": None if item.trace is None else _trace_dict(item.trace),
    }


def _trace_dict(trace: ItemTrace) -> dict[str, Any]:
    return {
        "road_scores": {road.value: score for road, score in trace.road_scores},
        "combined": trace.combined,
        "factors": [[name, factor] for name, factor in trace.factors],
        "cues": list(trace.cues),
    }


def _last_interaction_dict(last: LastInteraction) -> dict[str, Any]:
    return {
        "entity_id": str(last.entity_id),
        "last_met_at": _iso(last.last_met_at) if last.last_met_at is not None else None,
        "elapsed": last.elapsed.total_seconds() if last.elapsed is not None else None,
    }


def _scene_resolution_dict(resolution: SceneResolution) -> dict[str, Any]:
    return {
        "participant_index": resolution.participant_index,
        "status": resolution.status.value,
        "entity_ids": [str(i) for i in resolution.entity_ids],
    }


def _omission_dict(omission: Omission) -> dict[str, str]:
    entry = {"id": str(omission.id), "reason": omission.reason}
    if omission.duplicate_of is not None:
        entry["duplicate_of"] = str(omission.duplicate_of)
    return entry


@attrs.frozen(kw_only=True)
class ContinuityContextPack:
    """The structured answer of ``retrieve``: ranked items, sections, notions, links, omissions.

    Attributes:
        query: the cue text (``None`` when recalled from a scene, activity or range alone).
        items: recalled memories, globally ranked by score with canonical ties (score, newer,
            object type, id), de-duplicated: one item per memory, and one per text (an item
            whose :func:`same_text_key` and status are those of a higher-ranked item is a
            ``"duplicate_text"`` omission instead).
        sections: section name -> ids of items in that section, in rank order, capped.
        entities: notions met, with current names.
        links: links among the items.
        omissions: memories met but left out, with a reason, sorted by id.
        completeness: candidate recall completeness.
        telemetry: counters: ``roots_considered`` (candidates from the vector index),
            ``roots_admitted`` and ``roots_omitted`` (by graph authority), ``nodes_expanded``,
            ``hub_notions_narrowed``, ``outside_time_window``, ``not_yet_recorded`` (``as_of``),
            ``items``, ``entities``, ``omissions`` and ``omitted_<reason>`` per omission reason.
        token_counter: the name of the counter :meth:`render` uses.
        max_tokens: default token budget of :meth:`render`.
        last_interactions: for each recognised scene participant, when the character last met
            them (empty without a scene).
        scene_resolutions: how each scene participant reference resolved, in the scene's order
            (empty without a scene).
    """

    query: str | None
    items: tuple[PackItem, ...] = ()
    sections: Mapping[str, tuple[MemoryId, ...]] = attrs.field(factory=dict)
    entities: tuple[PackEntity, ...] = ()
    links: tuple[MemoryLink, ...] = ()
    omissions: tuple[Omission, ...] = ()
    completeness: VectorRecallCompleteness = _NOT_REQUESTED
    telemetry: Mapping[str, int] = attrs.field(factory=dict)
    token_counter: TokenCounter | None = attrs.field(default=None, eq=False, repr=False)
    max_tokens: int | None = None
    last_interactions: tuple[LastInteraction, ...] = ()
    scene_resolutions: tuple[SceneResolution, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of the pack with ``format_version`` (stable key order).

        ``items`` is the ranked list; each item has ``id``, ``object_type``, ``text``,
        ``occurred_at`` (ISO 8601), ``score``, ``signals``, ``status``, ``provenance_ids``,
        ``derived_type`` (or ``None``), ``entity_ids``, ``admitted_by`` (road values),
        ``seconds_since_support`` (an int or ``None``), ``direction`` (``"owed_by_character"``,
        ``"owed_to_character"`` or ``None``) and ``resolved_by`` (ids). Each omission has ``id``
        and ``reason``, and ``duplicate_of`` (the kept item's id) when the reason is
        ``"duplicate_text"``. ``last_interactions`` holds ``entity_id``, ``last_met_at`` (ISO
        8601 or ``None``) and ``elapsed`` (seconds as a number, or ``None``);
        ``scene_resolutions`` holds ``participant_index``, ``status`` and ``entity_ids``.
        Ids are strings. Format 1 had neither the four item keys nor the two pack keys.
        """
        return {
            "format_version": PACK_FORMAT_VERSION,
            "query": self.query,
            "items": [_item_dict(item) for item in self.items],
            "sections": {name: [str(i) for i in ids] for name, ids in self.sections.items()},
            "entities": [
                {"id": str(e.id), "entity_type": e.entity_type, "names": list(e.names)} for e in self.entities
            ],
            "links": [
                {
                    "id": str(link.id),
                    "from_id": str(link.from_id),
                    "relation": link.relation.value,
                    "to_id": str(link.to_id),
                }
                for link in self.links
            ],
            "omissions": [_omission_dict(o) for o in self.omissions],
            "completeness": {
                "kind": self.completeness.kind.value,
                "scanned": self.completeness.scanned,
                "fetched": self.completeness.fetched,
            },
            "telemetry": dict(sorted(self.telemetry.items())),
            "token_counter": self.token_counter.name if self.token_counter else None,
            "last_interactions": [_last_interaction_dict(last) for last in self.last_interactions],
            "scene_resolutions": [_scene_resolution_dict(r) for r in self.scene_resolutions],
        }

    def render(self, max_tokens: int | None = None) -> str:
        """Render the pack as prompt text within a token budget.

        Items are written in rank order, one per line with type, time and text, under a header
        naming the known entities. Writing stops at the first item that would exceed the budget
        (the best item alone is cut to fit), so the most relevant memories always come first.
        The header takes at most half the budget (it is cut to fit), so a long list of names
        never crowds out the memories. A cut keeps whole words and ends in ``" ..."``; a single
        word too long for the budget is cut by characters.

        Every line is counted by the pack's counter and never below :func:`charmem.token_floor`
        (one token per 4 characters), so the text is at most ``4 * max_tokens`` characters
        whatever is stored and whatever the counter. Control characters are dropped and every
        line break ``str.splitlines`` knows inside a text starts an indented continuation line,
        so stored text can never forge a memory line of its own.

        Args:
            max_tokens: the budget in tokens of the pack's :class:`~charmem.ports.TokenCounter`
                (default: the context's ``max_tokens``; ``None`` means unbounded).

        Returns:
            str: the prompt text (empty when nothing was recalled).

        Raises:
            DraftValidationError: ``max_tokens`` is not a positive int or ``None`` (the rule of
                :attr:`RetrievalContext.max_tokens`; a zero or negative budget used to give an
                empty prompt silently).
        """
        if max_tokens is not None and (
            isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1
        ):
            raise DraftValidationError(
                f"max_tokens must be a positive int (a budget in tokens) or None, not {max_tokens!r}",
                field="max_tokens",
            )
        counter = self.token_counter or WhitespaceTokenCounter()
        budget = max_tokens if max_tokens is not None else self.max_tokens
        return render_lines(self.items, self.entities, counter, budget)
