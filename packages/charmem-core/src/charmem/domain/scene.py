"""Scenes: the occasion an episode happened in, and the one a character is in when it recalls.

A :class:`Scene` says when (``at``), who was there (:class:`SceneParticipant`: a notion id, a name
or a free description), where (:class:`SceneSetting`: a key and/or words) and any custom
key/values. On write it is part of an episode; on read (``RetrievalContext(scene=...)``) it is
what brings memories to mind when there is no topic at all.

Raises (at construction):
    DraftValidationError: a naive ``at`` or one whose offset is not a whole number of minutes, a
        participant or setting with nothing in it, blank text, a non-``str`` custom key or value.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from types import MappingProxyType
from typing import Any

import attrs

from charmem.domain import _fields
from charmem.domain._fields import items_of, optional_id
from charmem.domain.ids import MemoryId
from charmem.errors import DraftValidationError

__all__ = ["Scene", "SceneParticipant", "SceneSetting", "episode_time"]


def _optional_text(_instance: object, attribute: attrs.Attribute[str | None], value: str | None) -> None:
    if value is not None:
        _fields.text(_instance, attribute, value)


@attrs.frozen(kw_only=True)
class SceneParticipant:
    """Someone present: a notion id, a name, a free description ("a man with a deep voice"), or several.

    Attributes:
        entity_id: the notion, when the application knows who it is.
        name: a name as spoken; on read it resolves to the notions currently known by it.
        description: words describing the person; recalls similar occasions, never decides who
            anyone is.

    Raises:
        DraftValidationError: all three are ``None``, or a name or description is blank.
    """

    entity_id: MemoryId | None = attrs.field(default=None, converter=optional_id)
    name: str | None = attrs.field(default=None, validator=_optional_text)
    description: str | None = attrs.field(default=None, validator=_optional_text)

    def __attrs_post_init__(self) -> None:
        if self.entity_id is None and self.name is None and self.description is None:
            raise DraftValidationError(
                "a SceneParticipant needs an entity_id, a name or a description", field="participants"
            )


@attrs.frozen(kw_only=True)
class SceneSetting:
    """Where a scene happens: an application key (``"kitchen"``, a place id) and/or words.

    Attributes:
        key: matched exactly; on read it recalls what was formed in the same setting.
        words: a description of the place; recalls occasions in similar settings.

    Raises:
        DraftValidationError: both are ``None``, or one is blank.
    """

    key: str | None = attrs.field(default=None, validator=_optional_text)
    words: str | None = attrs.field(default=None, validator=_optional_text)

    def __attrs_post_init__(self) -> None:
        if self.key is None and self.words is None:
            raise DraftValidationError("a SceneSetting needs a key or words", field="setting")


def _participants(values: Any) -> tuple[SceneParticipant, ...]:
    if values is None:
        return ()
    found = tuple(items_of(values, "SceneParticipant values", "participants"))
    for value in found:
        if not isinstance(value, SceneParticipant):
            raise DraftValidationError(
                f"participants must hold SceneParticipant values, not {type(value).__name__}",
                field="participants",
            )
    return found


def _custom_values(values: Any) -> Mapping[str, str]:
    if values is None:
        return MappingProxyType({})
    if not isinstance(values, Mapping):
        raise DraftValidationError(
            f"custom_values must be a mapping of str to str, not {type(values).__name__}",
            field="custom_values",
        )
    checked: dict[str, str] = {}
    for key in sorted(values, key=lambda k: k if isinstance(k, str) else ""):
        value = values[key]
        if not isinstance(key, str) or not key.strip() or not isinstance(value, str):
            raise DraftValidationError(
                f"custom_values must map non-blank str keys to str values, got {key!r}: {value!r}",
                field="custom_values",
            )
        try:
            (key + value).encode("utf-8")
        except UnicodeEncodeError as exc:
            raise DraftValidationError(
                f"custom_values contain a lone surrogate at {key!r}; use valid Unicode", field="custom_values"
            ) from exc
        checked[key] = value
    return MappingProxyType(checked)


@attrs.frozen(kw_only=True)
class Scene:
    """An occasion: when, who, where and any custom key/values.

    Attributes:
        at: when it happens, timezone-aware with a whole-minute offset (kept exactly). On write
            it is the episode's ``occurred_at``; on read, the reference time of recall.
        participants: who is present, in the caller's order (a
            :class:`~charmem.domain.retrieval.SceneResolution` names a participant by its index).
        setting: where it happens, or ``None``.
        custom_values: application key/values (``{"activity": "chess"}``), ``str`` to ``str``,
            read-only; recall matches a value exactly.

    Raises:
        DraftValidationError: see the module docstring.
    """

    at: datetime = attrs.field(validator=_fields.aware)
    participants: tuple[SceneParticipant, ...] = attrs.field(default=(), converter=_participants)
    setting: SceneSetting | None = attrs.field(
        default=None, validator=attrs.validators.optional(_fields.instance_of(SceneSetting))
    )
    custom_values: Mapping[str, str] = attrs.field(factory=dict, converter=_custom_values, hash=False)

    def __attrs_post_init__(self) -> None:
        if not isinstance(self.at, datetime):
            raise DraftValidationError("a Scene needs its time: at=datetime(..., tzinfo=...)", field="at")

    # pickle and copy: a mappingproxy cannot be pickled, so the state holds a plain dict and
    # the proxy is rebuilt on load (attrs generates neither method once the class defines them).
    def __getstate__(self) -> dict[str, Any]:
        state = {field.name: getattr(self, field.name) for field in attrs.fields(type(self))}
        state["custom_values"] = dict(self.custom_values)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        for name, value in state.items():
            object.__setattr__(self, name, _custom_values(value) if name == "custom_values" else value)

    @property
    def participant_entity_ids(self) -> tuple[MemoryId, ...]:
        """The notion ids of participants given by id (sorted, unique)."""
        return tuple(sorted({p.entity_id for p in self.participants if p.entity_id is not None}))


def episode_time(occurred_at: datetime | None, scene: Scene | None) -> datetime | None:
    """An episode's time given its scene (rule: a scene's ``at`` is its episode's ``occurred_at``).

    Without ``occurred_at`` the episode takes ``scene.at`` exactly (its UTC offset kept). When
    both are given they must be the same instant with the same UTC offset: ``18:30+02:00`` and
    ``16:30+00:00`` are one instant but not one local time, so they disagree.

    Args:
        occurred_at: the episode's own time, timezone-aware, or ``None`` (not given).
        scene: the episode's scene, or ``None``.

    Returns:
        datetime | None: ``occurred_at`` when given, else ``scene.at``; ``None`` when neither is.

    Raises:
        DraftValidationError: both are given and differ in instant or in UTC offset.
    """
    if scene is None:
        return occurred_at
    if occurred_at is None:
        return scene.at
    if occurred_at == scene.at and occurred_at.utcoffset() == scene.at.utcoffset():
        return occurred_at
    raise DraftValidationError(
        f"occurred_at {occurred_at.isoformat()} disagrees with scene.at {scene.at.isoformat()}: a "
        "scene's at is its episode's time; give only one of them, or the same datetime with the "
        "same UTC offset",
        field="occurred_at",
    )
