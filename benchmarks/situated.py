"""Situated recall on companion scenarios: who walks in, what the character brings to mind.

Each scenario (a JSON file in ``benchmarks/scenarios/``, format below) is written into a fresh
collection through the public API (``remember``, ``correct``, ``forget``, ``link``), then each of
its probes recalls from a scene (and optionally a topic) and is scored against what it expects:

- ``recalled``: labels of memories the pack must hold (an event's label is met by its episode or
  its observation; a belief's label by the belief);
- ``not_recalled``: labels it must not hold (a forgotten quarrel, what happened after the scene);
- ``last_met``: notion key -> ISO time of the last meeting at or before the scene, or ``null``;
- ``resolutions``: per scene participant, in order, ``"resolved"``, ``"ambiguous"`` or
  ``"unknown"``;
- ``direction``: belief label -> ``"owed_by_character"``, ``"owed_to_character"`` or ``null``;
- ``settled``: obligations that must be listed as settled (``resolved_by`` set, outside the
  ``commitments`` and ``open_loops`` sections); ``open``: obligations that must be listed in them.

The table gives, per probe: recalled k/n, leaks (``not_recalled`` found), people right (last
meetings and resolutions), obligations right, and whether every expectation held. The exit
status is 1 when one did not.

Scenario format (JSON)::

    {"name": "...", "character": "<notion key>",
     "notions": {"<key>": {"type": "person", "name": "Ann"}},
     "events": [
       {"at": "2026-03-02T09:00:00+01:00", "label": "...", "text": "...", "summary": "...",
        "participants": ["<key>", {"name": "Ann"}, {"description": "a man with a deep voice"}],
        "setting": {"key": "kitchen", "words": "the warm kitchen"}, "custom": {"k": "v"},
        "beliefs": [{"label": "...", "type": "commitment", "text": "...", "about": ["<key>"],
                     "actor": "<key>", "counterpart": "<key>"}]},
       {"at": "...", "rename": "<key>", "to": "Robert"},
       {"at": "...", "settle": "<matter label>", "by": "<resolver label>",
        "relation": "fulfills_commitment"},
       {"at": "...", "forget": "<label>"}],
     "probes": [{"name": "...", "scene": {"at": "...", "participants": [...], "setting": {...},
                 "custom": {...}}, "query": null, "time_range": ["<start>", "<end>"],
                 "expect": {...}}]}

    python benchmarks/situated.py                          # every scenario, local embedder
    python benchmarks/situated.py --embedder hashing --scenarios path/to/dir
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import attrs

from charmem import (
    Actor,
    BeliefAssertion,
    CharacterMemory,
    ContinuityContextPack,
    CorrectionTarget,
    CorrectMemoryDraft,
    Counterpart,
    DerivedMemoryDraft,
    DerivedType,
    EntityDraft,
    ForgetMemoryDraft,
    KnownAs,
    LinkDraft,
    MemoryId,
    Relation,
    RememberDrafts,
    RememberInput,
    ReplacementDerivedMemoryDraft,
    RetrievalContext,
    Scene,
    SceneParticipant,
    SceneSetting,
)
from charmem.testing import HashingEmbeddingProvider
from charmem_cli._common import cli_settings

SCENARIOS = Path(__file__).resolve().parent / "scenarios"
OBLIGATION_SECTIONS = ("commitments", "open_loops")


class ScenarioError(ValueError):
    """A scenario file is malformed: the message names the scenario and what to fix."""


@attrs.define
class World:
    """One scenario's ids: notion keys and memory labels to the ids written."""

    name: str
    notions: dict[str, MemoryId] = attrs.field(factory=dict)
    name_beliefs: dict[str, MemoryId] = attrs.field(factory=dict)
    episodes: dict[str, tuple[MemoryId, MemoryId]] = attrs.field(factory=dict)
    beliefs: dict[str, MemoryId] = attrs.field(factory=dict)

    def notion(self, key: str) -> MemoryId:
        if key not in self.notions:
            raise ScenarioError(f"{self.name}: unknown notion key {key!r}; declare it under 'notions'")
        return self.notions[key]

    def memory(self, label: str) -> MemoryId:
        if label in self.beliefs:
            return self.beliefs[label]
        if label in self.episodes:
            return self.episodes[label][0]
        raise ScenarioError(f"{self.name}: unknown label {label!r}; give it to an event or a belief")

    def ids_of(self, label: str) -> set[MemoryId]:
        """The ids that meet ``label`` in a pack: a belief, or an event's episode and observation."""
        if label in self.episodes:
            return set(self.episodes[label])
        return {self.memory(label)}

    def deterministic(self, *parts: str) -> MemoryId:
        return MemoryId.deterministic("situated", self.name, *parts)


def instant(value: Any, where: str) -> datetime:
    """An ISO 8601 time with its offset (a scenario never leaves the zone implicit)."""
    try:
        parsed = datetime.fromisoformat(value)
    except (TypeError, ValueError) as exc:
        raise ScenarioError(f"{where}: {value!r} is not an ISO 8601 time") from exc
    if parsed.tzinfo is None:
        raise ScenarioError(f"{where}: {value!r} has no UTC offset; write one (+01:00, Z)")
    return parsed


def participant(world: World, ref: Any) -> SceneParticipant:
    """A notion key, or ``{"key"|"name"|"description": ...}``."""
    if isinstance(ref, str):
        return SceneParticipant(entity_id=world.notion(ref))
    if not isinstance(ref, Mapping):
        raise ScenarioError(f"{world.name}: a participant is a notion key or an object, not {ref!r}")
    entity_id = world.notion(ref["key"]) if "key" in ref else None
    return SceneParticipant(entity_id=entity_id, name=ref.get("name"), description=ref.get("description"))


def scene_of(world: World, data: Mapping[str, Any], at: datetime) -> Scene:
    setting = data.get("setting")
    return Scene(
        at=at,
        participants=[participant(world, p) for p in data.get("participants", ())],
        setting=SceneSetting(key=setting.get("key"), words=setting.get("words")) if setting else None,
        custom_values=data.get("custom", {}),
    )


def belief(world: World, data: Mapping[str, Any], at: datetime) -> DerivedMemoryDraft:
    label = data["label"]
    about = {world.notion(k) for k in data.get("about", ())}
    assertions = []
    for role, key in (("actor", data.get("actor")), ("counterpart", data.get("counterpart"))):
        if key is not None:
            about.add(world.notion(key))
            assertions.append(
                BeliefAssertion(world.notion(key), Actor() if role == "actor" else Counterpart())
            )
    memory_id = world.deterministic("belief", label)
    world.beliefs[label] = memory_id
    return DerivedMemoryDraft(
        DerivedType(data.get("type", "reflection")),
        data["text"],
        id=memory_id,
        entity_ids=sorted(about),
        assertions=assertions,
        created_at=at,
    )


async def declare_notions(
    memory: CharacterMemory, world: World, notions: Mapping[str, Any], at: datetime
) -> None:
    """Each notion, with the given belief naming it when it has a name."""
    entities, named = [], []
    for key, spec in notions.items():
        notion = world.notions[key] = world.deterministic("notion", key)
        entities.append(EntityDraft(id=notion, entity_type=spec.get("type", "person"), created_at=at))
        if spec.get("name"):
            belief_id = world.name_beliefs[key] = world.deterministic("name", key, "0")
            named.append(
                DerivedMemoryDraft(
                    DerivedType.RELATIONSHIP_NOTE,
                    f"I know them as {spec['name']}.",
                    id=belief_id,
                    entity_ids=[notion],
                    assertions=[BeliefAssertion(notion, KnownAs(spec["name"]))],
                    given_by_application=True,
                    created_at=at,
                )
            )
    await memory.remember(RememberDrafts(entities=entities, derived=named))


async def remember_event(
    memory: CharacterMemory, world: World, event: Mapping[str, Any], at: datetime
) -> None:
    label = event["label"]
    episode_id, observation_id = (
        world.deterministic("episode", label),
        world.deterministic("observation", label),
    )
    world.episodes[label] = (episode_id, observation_id)
    speaker = event.get("speaker")
    entry = RememberInput(
        event["text"],
        summary=event.get("summary"),
        episode_id=episode_id,
        observation_id=observation_id,
        created_at=at,
        speaker_entity_id=world.notion(speaker) if speaker else None,
        derived=[belief(world, b, at) for b in event.get("beliefs", ())],
    ).with_scene(scene_of(world, event, at))
    await memory.remember(entry)


async def rename(memory: CharacterMemory, world: World, event: Mapping[str, Any], at: datetime) -> None:
    key = event["rename"]
    notion, old = world.notion(key), world.name_beliefs[key]
    new_id = world.deterministic("name", key, event["to"])
    await memory.correct(
        CorrectMemoryDraft(
            CorrectionTarget.derived_memory(old),
            f"now known as {event['to']}",
            replacement=ReplacementDerivedMemoryDraft(
                DerivedType.RELATIONSHIP_NOTE,
                f"I know them as {event['to']}.",
                id=new_id,
                entity_ids=[notion],
                assertions=[BeliefAssertion(notion, KnownAs(event["to"]))],
                given_by_application=True,
                created_at=at,
            ),
            recorded_at=at,
        )
    )
    world.name_beliefs[key] = new_id


async def play(memory: CharacterMemory, world: World, scenario: Mapping[str, Any]) -> None:
    """Write the scenario's events in order, each at its own time."""
    for index, event in enumerate(scenario.get("events", ())):
        at = instant(event.get("at"), f"{world.name} event {index}")
        if "rename" in event:
            await rename(memory, world, event, at)
        elif "settle" in event:
            relation = Relation(event.get("relation", "resolves"))
            await memory.link(
                LinkDraft(world.memory(event["by"]), relation, world.memory(event["settle"]), recorded_at=at)
            )
        elif "forget" in event:
            await memory.forget(
                ForgetMemoryDraft(
                    target_id=world.memory(event["forget"]), rationale="scenario", recorded_at=at
                )
            )
        elif "text" in event:
            await remember_event(memory, world, event, at)
        else:
            raise ScenarioError(f"{world.name} event {index}: give text, rename, settle or forget")


@attrs.frozen
class Score:
    """How one probe did: (right, expected) per kind of expectation, and leaks."""

    recalled: tuple[int, int]
    leaks: int
    people: tuple[int, int]
    obligations: tuple[int, int]

    @property
    def passed(self) -> bool:
        return self.leaks == 0 and all(
            right == wanted for right, wanted in (self.recalled, self.people, self.obligations)
        )


def score_probe(world: World, pack: ContinuityContextPack, expect: Mapping[str, Any]) -> Score:
    """Score a pack against a probe's expectations (module docstring)."""
    items = {item.id: item for item in pack.items}
    found = [any(i in items for i in world.ids_of(label)) for label in expect.get("recalled", ())]
    leaks = sum(any(i in items for i in world.ids_of(label)) for label in expect.get("not_recalled", ()))
    met = {str(li.entity_id): li.last_met_at for li in pack.last_interactions}
    last = [
        met.get(str(world.notion(key)), "missing")
        == (instant(when, f"{world.name} last_met") if when else None)
        for key, when in expect.get("last_met", {}).items()
    ]
    statuses = [r.status.value for r in sorted(pack.scene_resolutions, key=lambda r: r.participant_index)]
    wanted = list(expect.get("resolutions", ()))
    people = [*last, *(i < len(statuses) and statuses[i] == status for i, status in enumerate(wanted))]
    listed = {i for section in OBLIGATION_SECTIONS for i in pack.sections.get(section, ())}
    checks = []
    for label, direction in expect.get("direction", {}).items():
        item = items.get(world.memory(label))
        checks.append(item is not None and (item.direction.value if item.direction else None) == direction)
    for label in expect.get("settled", ()):
        item = items.get(world.memory(label))
        checks.append(item is not None and bool(item.resolved_by) and item.id not in listed)
    checks.extend(world.memory(label) in listed for label in expect.get("open", ()))
    return Score(
        recalled=(sum(found), len(found)),
        leaks=leaks,
        people=(sum(people), len(people)),
        obligations=(sum(checks), len(checks)),
    )


async def run_scenario(path: Path, settings_of: Any, embedder: Any) -> list[tuple[str, Score]]:
    """Write one scenario into a fresh collection and score each of its probes."""
    scenario = json.loads(await asyncio.to_thread(path.read_text, encoding="utf-8"))
    world = World(scenario.get("name", path.stem))
    start = instant(scenario["events"][0]["at"], f"{world.name} first event")
    character = world.deterministic("notion", scenario["character"]) if scenario.get("character") else None
    with tempfile.TemporaryDirectory() as root:
        memory = await CharacterMemory.open(
            settings_of(root), "situated", embedding_provider=embedder, character_id=character
        )
        try:
            await declare_notions(memory, world, scenario.get("notions", {}), start)
            await play(memory, world, scenario)
            results = []
            for probe in scenario.get("probes", ()):
                at = instant(probe["scene"]["at"], f"{world.name} probe {probe.get('name')}")
                window = probe.get("time_range")
                context = RetrievalContext(
                    query=probe.get("query"),
                    scene=scene_of(world, probe["scene"], at),
                    time_range=(instant(window[0], "time_range"), instant(window[1], "time_range"))
                    if window
                    else None,
                )
                pack = await memory.retrieve(context)
                results.append((probe.get("name", "?"), score_probe(world, pack, probe.get("expect", {}))))
            return results
        finally:
            await memory.close()


def fraction(pair: tuple[int, int]) -> str:
    return f"{pair[0]}/{pair[1]}" if pair[1] else "-"


async def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--scenarios", type=Path, default=SCENARIOS, help="a directory of scenario JSON files"
    )
    parser.add_argument("--embedder", choices=("local", "hashing"), default="local")
    args = parser.parse_args(argv)
    environ = {"EMBEDDING_PROVIDER": args.embedder}
    embedder = HashingEmbeddingProvider() if args.embedder == "hashing" else None

    def settings_of(root: str) -> Any:
        return cli_settings(environ, root)

    print(
        f"{'scenario':<24} {'probe':<40} {'recalled':>8} {'leaks':>5} {'people':>8} {'obligations':>11}  pass"
    )
    passed = total = 0
    for path in sorted(args.scenarios.glob("*.json")):
        for probe, score in await run_scenario(path, settings_of, embedder):
            total += 1
            passed += score.passed
            print(
                f"{path.stem:<24} {probe[:40]:<40} {fraction(score.recalled):>8} {score.leaks:>5}"
                f" {fraction(score.people):>8} {fraction(score.obligations):>11}"
                f"  {'yes' if score.passed else 'NO'}"
            )
    print(f"{passed}/{total} probes met every expectation")
    return 0 if passed == total else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
