"""The scene options of ``charmem remember`` and ``charmem recall``, and what they build.

``--participant`` (repeatable) takes ``id:<uuid>``, ``name:<text>`` or ``desc:<text>`` (a bare
text is a name); ``--setting-key``, ``--setting-words``, ``--custom KEY=VALUE`` (repeatable) and
``--at`` (the scene's time, ISO 8601 with an offset) complete the scene. The same functions build
the ``RememberInput`` and ``RetrievalContext`` whether the command runs on the stores here or
through a server, so both answer the same.
"""

from __future__ import annotations

import argparse
from datetime import datetime
from typing import Any, Final

from charmem import (
    CharmemError,
    RememberInput,
    RememberOutcome,
    RetrievalContext,
    Scene,
    SceneParticipant,
    SceneSetting,
)
from charmem.errors import ConfigurationError

__all__ = ["add_scene_options", "recall_context", "remember_input", "remembered", "scene_of"]

#: ``--participant`` prefixes and the ``SceneParticipant`` field each one fills.
PARTICIPANT_PREFIXES: Final = {"id": "entity_id", "name": "name", "desc": "description"}
_EXAMPLE: Final = "e.g. 2024-06-01T18:30:00+00:00 or 2024-06-01T18:30:00Z"


def add_scene_options(parser: argparse.ArgumentParser) -> None:
    """Add ``--participant``, ``--setting-key``, ``--setting-words``, ``--custom`` and ``--at``."""
    scene = parser.add_argument_group("scene", "the occasion: who, where, when, custom key/values")
    scene.add_argument(
        "--participant",
        action="append",
        default=[],
        metavar="id:UUID|name:TEXT|desc:TEXT",
        help="someone present (repeatable): a notion id, a name, or a description such as "
        "'desc:a man with a deep voice'; a bare text is a name",
    )
    scene.add_argument("--setting-key", help="where, as an exact key ('kitchen', a place id)")
    scene.add_argument("--setting-words", help="where, in words ('a noisy cafe by the sea')")
    scene.add_argument(
        "--custom", action="append", default=[], metavar="KEY=VALUE", help="a custom value (repeatable)"
    )
    scene.add_argument("--at", help=f"the scene's time, ISO 8601 with an offset ({_EXAMPLE}; default: now)")


def _participant(value: str) -> SceneParticipant:
    prefix, colon, text = value.partition(":")
    field = PARTICIPANT_PREFIXES.get(prefix.strip().lower()) if colon else None
    if field is None:
        field, text = "name", value
    try:
        return SceneParticipant(**{field: text.strip()})
    except CharmemError as exc:
        raise ConfigurationError(
            f"--participant {value!r}: give id:UUID, name:TEXT or desc:TEXT ({exc})", key="--participant"
        ) from None


def _custom(values: list[str]) -> dict[str, str]:
    found: dict[str, str] = {}
    for value in values:
        key, equals, text = value.partition("=")
        if not equals or not key.strip():
            raise ConfigurationError(
                f"--custom {value!r}: give KEY=VALUE, e.g. --custom game=chess", key="--custom"
            )
        found[key.strip()] = text
    return found


def parse_time(value: str, option: str) -> datetime:
    """An ISO 8601 instant with a UTC offset, for ``option``.

    Raises:
        ConfigurationError: not ISO 8601, or no offset (``key=option``).
    """
    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        raise ConfigurationError(
            f"{option} {value!r} is not an ISO 8601 time ({_EXAMPLE})", key=option
        ) from None
    if when.utcoffset() is None:
        raise ConfigurationError(f"{option} {value!r} has no UTC offset; add one ({_EXAMPLE})", key=option)
    return when


def _wants_scene(args: argparse.Namespace) -> bool:
    return bool(
        args.participant or args.setting_key or args.setting_words or args.custom or args.at is not None
    )


def scene_of(args: argparse.Namespace, default_at: datetime | None = None) -> Scene | None:
    """The scene the options describe, or ``None`` when none is given.

    Args:
        args: the parsed options (see :func:`add_scene_options`).
        default_at: the time when ``--at`` is absent (default: now, in this machine's zone).

    Raises:
        ConfigurationError: an option is malformed or the scene is refused (the message names
            the option).
    """
    if not _wants_scene(args):
        return None
    at = parse_time(args.at, "--at") if args.at is not None else default_at or datetime.now().astimezone()
    setting = None
    try:
        if args.setting_key is not None or args.setting_words is not None:
            setting = SceneSetting(key=args.setting_key, words=args.setting_words)
        return Scene(
            at=at,
            participants=[_participant(value) for value in args.participant],
            setting=setting,
            custom_values=_custom(args.custom),
        )
    except ConfigurationError:
        raise
    except CharmemError as exc:
        raise ConfigurationError(f"the scene options are refused: {exc}", key="--participant") from None


def remember_input(args: argparse.Namespace) -> RememberInput:
    """``charmem remember``'s input: the text, its time and its scene (``--at`` is its time).

    ``--occurred-at`` and ``--at`` are one time: either one, or both the same instant with the same
    UTC offset (as the library requires of an episode and its scene).

    Raises:
        ConfigurationError: a malformed option, or two different times.
    """
    occurred = parse_time(args.occurred_at, "--occurred-at") if args.occurred_at else None
    scene = scene_of(args, default_at=occurred)
    if scene is None:
        return RememberInput(args.text, occurred_at=occurred)
    if occurred is not None and (occurred != scene.at or occurred.utcoffset() != scene.at.utcoffset()):
        raise ConfigurationError(
            f"--occurred-at {args.occurred_at} and --at {args.at} differ: the scene's time is the "
            "episode's; give one of them",
            key="--at",
        )
    return RememberInput(args.text, occurred_at=scene.at).with_scene(scene)


def recall_context(args: argparse.Namespace) -> RetrievalContext:
    """``charmem recall``'s context: the question, the scene, or both, with ``--limit``.

    Raises:
        ConfigurationError: neither a question nor a scene option, or a malformed option.
    """
    scene = scene_of(args)
    if args.query is None and scene is None:
        raise ConfigurationError(
            "give a question, or a scene to recall from (--participant, --setting-key, "
            "--setting-words, --custom, --at), or both",
            key="query",
        )
    return RetrievalContext(query=args.query, scene=scene, max_items=args.limit)


def remembered(outcome: RememberOutcome) -> dict[str, Any]:
    """What ``charmem remember`` prints (as JSON), here and through a server alike."""
    return {
        "object_ids": [str(i) for i in outcome.object_ids],
        "episode_ids": [str(i) for i in outcome.episode_ids],
        "observation_ids": [str(i) for i in outcome.observation_ids],
        "repair_markers": len(outcome.repair_markers),
        "warnings": [{"kind": w.kind.value, "ids": [str(i) for i in w.ids]} for w in outcome.warnings],
    }
