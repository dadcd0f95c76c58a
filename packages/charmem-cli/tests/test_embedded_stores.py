"""The walking skeleton on the real embedded stores: persistent Oxigraph + Qdrant Edge + SQLite.

These tests open the stores through ``CharacterMemory.open`` exactly as a user does; the
embedder is the deterministic hashing provider so they stay fast (the LoCoMo test uses MiniLM).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from datetime import UTC, datetime

from charmem import (
    CandidateValidationStatus,
    CharacterMemory,
    ObjectType,
    RememberInput,
    RetrievalContext,
    Settings,
)
from charmem.ports import VectorPoint
from charmem.testing import stores_of

HOSTILE = [
    "She said \"hello\" and 'bye'",
    "Triple \"\"\"quotes\"\"\" and '''single''' ones",
    "Line one\nline two\r\nline three\ttabbed",
    "Braces {like} {{these}} and } ; DROP ALL ; {",
    'Back\\slashes \\n \\" \\u0041 and a trailing backslash \\',
    "Emoji 🎉🐕‍🦺 and flags 🇵🇹",
    "한국어 문장도 기억해요",
    "zero\u200bwidth\u200djoiner\ufeffbom",
    "<urn:charmem:x> . } GRAPH ?g { ?s ?p ?o } # comment",
]
WHEN = datetime(2024, 3, 3, 18, 10, tzinfo=UTC)

READER = textwrap.dedent(
    """
    import asyncio, json, sys
    from charmem import CharacterMemory, RetrievalContext, Settings
    import os

    async def main():
        settings = Settings.from_mapping(os.environ)
        async with CharacterMemory.open(settings, "skeleton") as memory:
            out = []
            for query in json.loads(sys.argv[1]):
                pack = await memory.retrieve(RetrievalContext(query=query))
                out.append([[str(i.id), i.object_type.value, i.text] for i in pack.items])
        print(json.dumps(out))

    asyncio.run(main())
    """
)


async def test_reopen_in_a_new_process_gives_the_same_ids_order_and_exact_texts(
    embedded_settings: Settings, child_env: dict[str, str]
) -> None:
    async with CharacterMemory.open(embedded_settings, "skeleton") as memory:
        for index, text in enumerate(HOSTILE):
            await memory.remember(RememberInput(text, occurred_at=WHEN.replace(minute=index)))
        queries = ["quotes", "DROP ALL", "Emoji and flags", "문장도", "trailing backslash", "zero width"]
        before = []
        for query in queries:
            pack = await memory.retrieve(RetrievalContext(query=query))
            before.append([[str(i.id), i.object_type.value, i.text] for i in pack.items])
    assert all(before)
    result = subprocess.run(
        [sys.executable, "-c", READER, json.dumps(queries)],
        env=child_env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    after = json.loads(result.stdout)
    assert after == before
    recalled = {text for pack in after for _id, kind, text in pack if kind == "observation"}
    assert recalled
    assert recalled <= set(HOSTILE)


async def test_every_hostile_text_reads_back_byte_identical(embedded_settings: Settings) -> None:
    async with CharacterMemory.open(embedded_settings, "skeleton") as memory:
        ids = []
        for text in HOSTILE:
            outcome = await memory.remember(RememberInput(text, occurred_at=WHEN))
            ids.append(outcome.object_ids[1])
    async with CharacterMemory.open(embedded_settings, "skeleton") as memory:
        stored = await stores_of(memory).graph.get_objects(ids)
    assert [stored[i].text.encode("utf-8") for i in ids] == [t.encode("utf-8") for t in HOSTILE]  # type: ignore[union-attr]


LOCKER = textwrap.dedent(
    """
    import asyncio, os, sys, time
    from charmem import CharacterMemory, Settings, StoreLockedError

    async def main():
        start = time.monotonic()
        try:
            await CharacterMemory.open(Settings.from_mapping(os.environ), "skeleton")
        except StoreLockedError as exc:
            print(f"locked {time.monotonic() - start:.2f} {exc}")
            return
        print("opened")

    asyncio.run(main())
    """
)


async def test_a_second_process_gets_store_locked_error_fast(
    embedded_settings: Settings, child_env: dict[str, str]
) -> None:
    async with CharacterMemory.open(embedded_settings, "skeleton") as memory:
        await memory.remember(RememberInput("hold the lock", occurred_at=WHEN))
        started = time.monotonic()
        result = subprocess.run(
            [sys.executable, "-c", LOCKER],
            env=child_env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        elapsed = time.monotonic() - started
    assert result.stdout.startswith("locked"), result.stdout + result.stderr
    seconds_to_refuse = float(result.stdout.split()[1])
    assert seconds_to_refuse < 5.0, f"refusal took {seconds_to_refuse} s (process {elapsed:.1f} s)"


async def test_prepare_and_validate_write_nothing_on_the_embedded_stores(
    embedded_settings: Settings,
) -> None:
    async with CharacterMemory.open(embedded_settings, "skeleton") as memory:
        await memory.remember(RememberInput("already here", occurred_at=WHEN))

        async def counts() -> tuple[int, int, int]:
            return (
                await stores_of(memory).graph.statement_count(),
                await stores_of(memory).vectors.count(),
                await stores_of(memory).stats.row_count(),
            )

        before = await counts()
        plan = await memory.prepare(RememberInput("only planned", occurred_at=WHEN))
        validations = await memory.validate_plan(plan)
        assert all(v.status is CandidateValidationStatus.VALID for v in validations)
        assert await counts() == before
        await memory.commit(plan)
        after = await counts()
        assert after[0] > before[0]
        assert after[1] == before[1] + 1
        assert after[2] > before[2]


async def test_graph_authority_omits_a_point_the_graph_does_not_hold(embedded_settings: Settings) -> None:
    from charmem import MemoryId

    async with CharacterMemory.open(embedded_settings, "skeleton") as memory:
        await memory.remember(RememberInput("the harbour logistics workshop", occurred_at=WHEN))
        ghost = MemoryId.new()
        vector = await memory.embedder.embed_query("the harbour logistics workshop")
        await stores_of(memory).vectors.upsert(
            [VectorPoint(id=ghost, object_type=ObjectType.OBSERVATION, vector=vector, text="ghost")]
        )
        pack = await memory.retrieve("the harbour logistics workshop")
    assert pack.items
    assert ghost not in {item.id for item in pack.items}
    assert {o.reason for o in pack.omissions if o.id == ghost} == {"not_in_graph"}


COMMITTER = textwrap.dedent(
    """
    import asyncio, json, os, sys
    from charmem import CharacterMemory, RememberWritePlan, Settings

    async def main():
        plan = RememberWritePlan.from_json(sys.stdin.read())
        async with CharacterMemory.open(Settings.from_mapping(os.environ), "skeleton") as memory:
            outcome = await memory.commit(plan)
        print(json.dumps({"objects": [str(i) for i in outcome.object_ids],
                          "links": [str(i) for i in outcome.link_ids]}))

    asyncio.run(main())
    """
)


async def test_a_plan_persisted_as_json_commits_in_another_process_with_the_same_ids(
    embedded_settings: Settings, child_env: dict[str, str]
) -> None:
    from charmem import DerivedMemoryDraft, DerivedType

    async with CharacterMemory.open(embedded_settings, "skeleton") as memory:
        plan = await memory.prepare(
            RememberInput('Plans travel well: {json} "quotes" 🎒', occurred_at=WHEN).with_derived_memory(
                DerivedMemoryDraft(DerivedType.OPEN_LOOP, "Pack the bag before Friday.")
            )
        )
    result = subprocess.run(
        [sys.executable, "-c", COMMITTER],
        input=plan.to_json(),
        env=child_env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    committed = json.loads(result.stdout)
    assert committed["objects"] == [str(i) for i in plan.object_ids]
    assert set(committed["links"]) == {str(link.id) for link in plan.derived_links}
    async with CharacterMemory.open(embedded_settings, "skeleton") as memory:
        stored = await stores_of(memory).graph.get_objects(list(plan.object_ids))
        assert set(stored) == set(plan.object_ids)
        assert set(plan.object_ids) - {plan.object_ids[0]} <= await stores_of(memory).vectors.point_ids()
