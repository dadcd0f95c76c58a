"""An episode's scene in the compact layout: its record value and its queryable triples.

The scene is authored content, so it lives in the episode's record literal (``"scene"``, left out
when the episode has none, so the record of an episode without a scene is what it always was) and
reads back from there exactly: ``at`` with its offset, the participants in order, the setting and
the custom key/values. Besides the record, the episode node gets the triples a query needs to find
"episodes in this setting" or "episodes listing this notion" with plain triple patterns (the
README's vocabulary table):

* ``<episode> vocab:settingKey "kitchen"`` and ``vocab:settingWords "..."``;
* ``<episode> vocab:sceneParticipant <episode/scene/participant/n>``, that node holding
  ``vocab:participantIndex n`` and, when given, ``vocab:participantEntity <notion>``,
  ``vocab:participantName "..."`` with ``vocab:participantNameKey`` (the name as name matching
  compares it), ``vocab:participantDescription "..."`` (a node per participant
  with its index: two participants alike stay two);
* ``<episode> vocab:sceneCustom <episode/scene/custom/n>``, that node holding ``vocab:customKey``
  and ``vocab:customValue`` (``n`` in key order).

Every literal is serialised by pyoxigraph (memory text is data); IRIs come from
:mod:`charmem_oxigraph._vocab`.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from charmem.domain.ids import MemoryId
from charmem.domain.rules import normalise_name
from charmem.domain.scene import Scene, SceneParticipant, SceneSetting
from pyoxigraph import Literal

from charmem_oxigraph import _vocab as v

__all__ = ["scene_from_json", "scene_json", "scene_lines"]


def _term(local_name: str) -> str:
    return f"<{v.VOCAB}{local_name}>"


_SETTING_KEY, _SETTING_WORDS = _term(v.SETTING_KEY), _term(v.SETTING_WORDS)
_PARTICIPANT, _INDEX = _term(v.SCENE_PARTICIPANT), _term(v.PARTICIPANT_INDEX)
_ENTITY, _NAME = _term(v.PARTICIPANT_ENTITY), _term(v.PARTICIPANT_NAME)
_DESCRIPTION, _NAME_KEY = _term(v.PARTICIPANT_DESCRIPTION), _term(v.PARTICIPANT_NAME_KEY)
_CUSTOM, _CUSTOM_KEY, _CUSTOM_VALUE = _term(v.SCENE_CUSTOM), _term(v.CUSTOM_KEY), _term(v.CUSTOM_VALUE)


def scene_json(scene: Scene) -> dict[str, Any]:
    """The record value of ``scene`` (the ``"scene"`` key of its episode's record).

    Returns:
        dict: ``{"at": ISO 8601 with the offset as given, "participants": [{"description",
        "entity_id", "name"}, ...] in order, "setting": {"key", "words"} | None,
        "custom_values": {key: value}}``; absent values are ``None``, ids canonical UUID text.
    """
    setting = scene.setting
    return {
        "at": scene.at.isoformat(),
        "participants": [
            {
                "entity_id": None if p.entity_id is None else str(p.entity_id.value),
                "name": p.name,
                "description": p.description,
            }
            for p in scene.participants
        ],
        "setting": None if setting is None else {"key": setting.key, "words": setting.words},
        "custom_values": dict(scene.custom_values),
    }


def scene_from_json(data: Any) -> Scene | None:  # noqa: ANN401 - a record's JSON value
    """Inverse of :func:`scene_json`; ``None`` (no scene recorded) reads as ``None``.

    Raises:
        KeyError, TypeError, ValueError: the value is not a scene record (the domain
            constructors' ``DraftValidationError`` is a ``ValueError``); the caller reports the
            node as corrupt.
    """
    if data is None:
        return None
    if not isinstance(data, dict) or not isinstance(data["at"], str):
        raise TypeError(f"a scene record must be an object with an ISO 8601 'at', not {type(data).__name__}")
    setting = data["setting"]
    return Scene(
        at=datetime.fromisoformat(data["at"]),
        participants=[
            SceneParticipant(
                entity_id=None if p["entity_id"] is None else MemoryId(p["entity_id"]),
                name=p["name"],
                description=p["description"],
            )
            for p in data["participants"]
        ],
        setting=None if setting is None else SceneSetting(key=setting["key"], words=setting["words"]),
        custom_values=data["custom_values"],
    )


def scene_lines(
    subject: str, episode_id: MemoryId, scene: Scene, resolve: Callable[[MemoryId, str | None], str]
) -> list[str]:
    """The triples making ``scene`` queryable, as N-Triples lines (the record holds the content).

    Args:
        subject: the episode node's IRI term (``<urn:charmem:episode:...>``).
        episode_id: the episode's id (its scene nodes' IRIs are built from it).
        scene: the episode's scene.
        resolve: maps a participant's notion id (declared ``entity``) to an IRI term.

    Returns:
        list[str]: lines ``<s> <p> o .``, settings first, then participants in order, then custom
        key/values in key order (see the module docstring).
    """
    lines: list[str] = []
    if scene.setting is not None:
        if scene.setting.key is not None:
            lines.append(f"{subject} {_SETTING_KEY} {Literal(scene.setting.key)} .")
        if scene.setting.words is not None:
            lines.append(f"{subject} {_SETTING_WORDS} {Literal(scene.setting.words)} .")
    for index, participant in enumerate(scene.participants):
        node = f"<{v.scene_participant_iri(episode_id, index)}>"
        lines += [f"{subject} {_PARTICIPANT} {node} .", f"{node} {_INDEX} {Literal(index)} ."]
        if participant.entity_id is not None:
            lines.append(f"{node} {_ENTITY} {resolve(participant.entity_id, 'entity')} .")
        if participant.name is not None:
            lines.append(f"{node} {_NAME} {Literal(participant.name)} .")
            lines.append(f"{node} {_NAME_KEY} {Literal(normalise_name(participant.name))} .")
        if participant.description is not None:
            lines.append(f"{node} {_DESCRIPTION} {Literal(participant.description)} .")
    for index, (key, value) in enumerate(sorted(scene.custom_values.items())):
        node = f"<{v.scene_custom_iri(episode_id, index)}>"
        lines += [
            f"{subject} {_CUSTOM} {node} .",
            f"{node} {_CUSTOM_KEY} {Literal(key)} .",
            f"{node} {_CUSTOM_VALUE} {Literal(value)} .",
        ]
    return lines
