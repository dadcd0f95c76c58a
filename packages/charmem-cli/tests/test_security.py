"""Security properties across the embedded stores: collection names, secrets, and what is logged.

* A collection name can never reach outside a store root: every embedded store (the Oxigraph
  directory, the Qdrant Edge shard directory, the SQLite stats file) and the facade refuse
  ``../x``, absolute paths, separators, NUL, over-long names, upper case (two names never differ
  only by case on a case-insensitive file system) and Windows device names with a
  ``ConfigurationError``, before anything is created on disk; an accepted name is exactly one
  directory below the vector root.
* Secrets (API keys, SPARQL passwords and tokens) never appear in the settings' repr or in the
  errors of settings validation.
* charmem's log events carry ids and counts, never memory text (texts, names, rationales,
  queries), unless the user sets ``LOG_MEMORY_TEXT=true``.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from charmem import (
    BeliefAssertion,
    CharacterMemory,
    ConfigurationError,
    CorrectionTarget,
    CorrectMemoryDraft,
    DerivedMemoryDraft,
    DerivedType,
    EntityDraft,
    ForgetMemoryDraft,
    IdConflictError,
    KnownAs,
    LinkDraft,
    MemoryId,
    Relation,
    RememberDrafts,
    RememberInput,
    RetrievalContext,
    Settings,
)
from charmem.settings import COLLECTION_NAME_PATTERN, RESERVED_COLLECTION_NAMES, validate_collection_name
from charmem.stats import SQLiteRetrievalStatsStore
from charmem.testing import EmbeddingFault, FaultyEmbeddingProvider, HashingEmbeddingProvider
from charmem_contract.strategies import fuzz_settings
from charmem_oxigraph import OxigraphGraphStore
from charmem_qdrant import EdgeVectorIndex

HOSTILE_NAMES = [
    "../x",
    "../../etc",
    "..",
    ".",
    "/tmp/absolute",
    "a/b",
    "a\\b",
    "a\x00b",
    "\x00",
    "a" * 129,
    "Upper",
    "UPPER",
    "memory\n",
    " memory",
    "",
    "-lead",
    "_lead",
    "ｆｕｌｌｗｉｄｔｈ",
    "é",
    "a.b",
    "con",
    "nul",
    "com1",
    "lpt9",
    "c:",
    "~",
    "$HOME",
    "%2e%2e",
]


def _tree(root: Path) -> set[str]:
    return {str(path.relative_to(root)) for path in root.rglob("*")} if root.exists() else set()


def _settings(root: Path, **more: str) -> Settings:
    """The embedded defaults (persistent Oxigraph, Qdrant Edge, SQLite stats) under ``root``."""
    return Settings.from_mapping(more).with_store_root(root)


async def _open_memory(root: Path, name: object) -> CharacterMemory:
    return await CharacterMemory.open(_settings(root), name, embedding_provider=HashingEmbeddingProvider())  # type: ignore[arg-type]


def _every_store_refuses(root: Path, name: object) -> None:
    """Each embedded store and the facade raise ConfigurationError for ``name``; no file appears."""
    before = _tree(root)
    paths = _settings(root)
    vectors = paths.vector_store_path
    openers = {
        "oxigraph": lambda: OxigraphGraphStore.open(name, path=paths.oxigraph_path),  # type: ignore[arg-type]
        "qdrant edge": lambda: EdgeVectorIndex(vectors, name, model_id="m", vector_size=4),  # type: ignore[arg-type]
        "qdrant edge drop": lambda: EdgeVectorIndex.drop(vectors, name),  # type: ignore[arg-type]
        "sqlite stats": lambda: SQLiteRetrievalStatsStore(paths.retrieval_stats_path, name),  # type: ignore[arg-type]
        "facade": lambda: asyncio.run(_open_memory(root, name)),
    }
    for store, opener in openers.items():
        with pytest.raises(ConfigurationError) as caught:
            opener()
        assert caught.value.key == "collection", f"{store} refused {name!r} without naming the collection"
    assert _tree(root) == before, f"a refused collection name {name!r} created files"


@pytest.mark.parametrize("name", HOSTILE_NAMES, ids=range(len(HOSTILE_NAMES)))
def test_hostile_collection_names_touch_nothing(tmp_path: Path, name: str) -> None:
    _settings(tmp_path).vector_store_path.mkdir()
    _every_store_refuses(tmp_path, name)


@pytest.mark.parametrize("name", [None, 5, b"memory", Path("memory")])
def test_collection_names_of_other_types_are_refused(tmp_path: Path, name: object) -> None:
    _every_store_refuses(tmp_path, name)


@fuzz_settings(200)
@given(name=st.text() | st.from_regex(COLLECTION_NAME_PATTERN, fullmatch=True))
@example(name="a" * 128)
@example(name="0")
def test_an_accepted_name_is_one_plain_lowercase_path_segment(name: str) -> None:
    try:
        validate_collection_name(name)
    except ConfigurationError as exc:
        refused: ConfigurationError | None = exc
    else:
        refused = None
    if refused is not None:
        assert refused.key == "collection"
        return
    assert 1 <= len(name) <= 128
    assert name == name.lower()
    assert name not in RESERVED_COLLECTION_NAMES
    assert Path(name).name == name
    assert Path(name).parts == (name,)
    assert not set(name) & set("/\\:\x00.~$% ")
    if name != name.upper():  # never two names differing only by case
        with pytest.raises(ConfigurationError):
            validate_collection_name(name.upper())


@pytest.mark.parametrize("key", ["OXIGRAPH_PATH", "VECTOR_STORE_PATH", "RETRIEVAL_STATS_PATH"])
def test_a_store_path_with_nul_is_a_configuration_error(tmp_path: Path, key: str) -> None:
    """Was a bare ``ValueError: embedded null byte`` from the file system calls."""
    with pytest.raises(ConfigurationError) as caught:
        _settings(tmp_path, **{key: str(tmp_path / "a\x00b")})
    assert caught.value.key == key
    nul = tmp_path / "a\x00b"
    direct = {
        "OXIGRAPH_PATH": lambda: OxigraphGraphStore.open("c", path=nul),
        "VECTOR_STORE_PATH": lambda: EdgeVectorIndex(nul, "c", model_id="m", vector_size=4),
        "RETRIEVAL_STATS_PATH": lambda: SQLiteRetrievalStatsStore(nul, "c"),
    }
    with pytest.raises(ConfigurationError) as caught:
        direct[key]()
    assert caught.value.key == key
    with pytest.raises(ConfigurationError):
        _settings(tmp_path).with_store_root(nul)


def test_a_vector_shard_is_exactly_one_directory_below_the_root(tmp_path: Path) -> None:
    index = EdgeVectorIndex(tmp_path / "vectors", "a" * 128, model_id="m", vector_size=4)
    try:
        assert index.path.parent == (tmp_path / "vectors").resolve()
        assert index.path.name == "a" * 128
    finally:
        asyncio.run(index.close())


# ------------------------------------------------------------------------------------ secrets

SECRETS = {
    "OPENAI_API_KEY": "sk-proj-NeverLogThisKey0123456789",
    "QDRANT_API_KEY": "qdrant-NeverLogThisKey0123",
    "SPARQL_PASSWORD": "sparql-NeverLogThisPassword",
    "SPARQL_BEARER_TOKEN": "bearer-NeverLogThisToken",
}


@pytest.mark.parametrize(
    "broken",
    [
        {"GRAPH_STORE_MODE": "sparql"},
        {"VECTOR_STORE_MODE": "service"},  # no QDRANT_CONNECTION_STRING
        {"EMBEDDING_DIMENSIONS": "many"},
        {"LOG_MEMORY_TEXT": "sometimes"},
        {"RETRIEVAL_STATS_STORE_MODE": "redis"},
    ],
)
def test_secrets_stay_out_of_the_settings_repr_and_errors(broken: dict[str, str]) -> None:
    mapping = {**SECRETS, "EMBEDDING_PROVIDER": "openai", "EMBEDDING_MODEL": "text-embedding-3-small"}
    settings = Settings.from_mapping(mapping)
    for secret in SECRETS.values():
        assert secret not in repr(settings)
        assert secret not in str(settings)
    with pytest.raises(ConfigurationError) as caught:
        Settings.from_mapping({**mapping, **broken})
    for secret in SECRETS.values():
        assert secret not in str(caught.value)
        assert secret not in repr(caught.value)


# ------------------------------------------------------------------------------------ logging

MARK = "zebrafishmarker"  # in every text, name, rationale and query of the workflow below


async def _workflow(root: Path, log_memory_text: bool) -> None:
    """Every operation that logs, including failures (an embedder fault, an id conflict)."""
    settings = _settings(root, LOG_MEMORY_TEXT=str(log_memory_text).lower())
    embedder = FaultyEmbeddingProvider(HashingEmbeddingProvider())
    async with CharacterMemory.open(settings, "logged", embedding_provider=embedder) as memory:
        assert memory.log_memory_text is log_memory_text
        person = MemoryId.new()
        await memory.remember(RememberDrafts(entities=[EntityDraft(id=person, entity_type=f"{MARK} person")]))
        remembered = await memory.remember(
            RememberInput(f"{MARK} planted tomatoes", summary=f"{MARK} garden day").with_derived_memory(
                DerivedMemoryDraft(
                    DerivedType.RELATIONSHIP_NOTE,
                    f"{MARK} is a friend",
                    entity_ids=[person],
                    assertions=[BeliefAssertion(person, KnownAs(f"{MARK} Mina"))],
                )
            )
        )
        belief = remembered.object_ids[-1]
        embedder.fail(EmbeddingFault.NAN)  # a repairable failure: logged as a warning
        faulty = await memory.remember(RememberInput(f"{MARK} rain again"))
        assert faulty.repair_markers
        embedder.heal()
        with pytest.raises(IdConflictError):
            await memory.remember(RememberDrafts(entities=[EntityDraft(id=person, entity_type=f"{MARK} x")]))
        await memory.correct(CorrectMemoryDraft(CorrectionTarget.derived_memory(belief), f"{MARK} was wrong"))
        await memory.link(
            LinkDraft(remembered.object_ids[0], Relation.ASSOCIATED_WITH, belief, rationale=MARK)
        )
        await memory.forget(ForgetMemoryDraft.suppress(remembered.object_ids[1], f"{MARK} forget it"))
        await memory.retrieve(RetrievalContext(query=f"{MARK} Mina tomatoes", include_suppressed=True))
        await memory.rebuild_vector_index()
        await memory.rebuild_stats()


def test_logs_carry_ids_not_memory_text(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)  # every logger, charmem's and the libraries', at DEBUG
    asyncio.run(_workflow(tmp_path, log_memory_text=False))
    logged = caplog.text
    assert "event='plan_committed'" in logged  # charmem did log, with ids and counts
    assert "vector_upsert_failed" in logged
    assert "memory_retrieved" in logged
    assert MARK not in logged


def test_log_memory_text_opts_in_to_texts_in_debug_events(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    asyncio.run(_workflow(tmp_path, log_memory_text=True))
    texts = [record.getMessage() for record in caplog.records if MARK in record.getMessage()]
    assert texts, "LOG_MEMORY_TEXT=true logged no memory text"
    assert all(record.levelno == logging.DEBUG for record in caplog.records if MARK in record.getMessage())
    assert any("memory_retrieved" in text and f"{MARK} Mina tomatoes" in text for text in texts)
    assert any("memory_texts_committed" in text and f"{MARK} planted tomatoes" in text for text in texts)
    assert any("memory_forget_texts" in text for text in texts)
