"""Pure lifecycle and identity rules, each in exactly one place (DESIGN §3, §4).

Nothing here touches a store: adapters and use cases call these functions so that a rule such as
"current iff not suppressed and not superseded" exists once and carries the spec's name.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Iterable, Sequence

from charmem.domain.ids import MemoryId
from charmem.domain.model import MemoryLink, MemoryObject, Relation

__all__ = [
    "canonical_content",
    "content_equal",
    "derived_link_id",
    "is_current",
    "name_occurs_in",
    "normalise_name",
    "voiced_text",
]

_WHITESPACE = re.compile(r"\s+")


def is_current(*, suppressed: bool, superseded: bool) -> bool:
    """Currency (spec "Memory permanence").

    Current iff Active (not suppressed) and no incoming ``supersedes`` link.

    Args:
        suppressed: a suppression lifecycle record applies to the memory.
        superseded: at least one ``supersedes`` link points at the memory.

    Returns:
        bool: whether the memory is current.
    """
    return not suppressed and not superseded


def derived_link_id(collection: str, from_id: MemoryId, relation: Relation, to_id: MemoryId) -> MemoryId:
    """The id of a link commit derives: ``MemoryId.deterministic(collection, from, relation, to)``.

    Replays therefore never duplicate derived links (DESIGN §3).
    """
    return MemoryId.deterministic(collection, from_id, relation.value, to_id)


def canonical_content(item: MemoryObject | MemoryLink) -> str:
    """The canonical encoding of an object's or link's authored content (DESIGN §4.3).

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
    """Normalise a ``KnownAs`` name for matching (DESIGN §3).

    NFKC (width), ``lower()`` (case, never ``casefold``: ``Straße`` and ``STRASSE`` differ), runs of
    whitespace collapsed to one space, trimmed.
    """
    return _WHITESPACE.sub(" ", unicodedata.normalize("NFKC", name).lower()).strip()


def name_occurs_in(name: str, text: str) -> bool:
    """Whether ``name``'s normalised form occurs in ``text`` on word boundaries."""
    needle = normalise_name(name)
    if not needle:
        return False
    haystack = normalise_name(text)
    pattern = r"(?<!\w)" + re.escape(needle) + r"(?!\w)"
    return re.search(pattern, haystack) is not None


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
