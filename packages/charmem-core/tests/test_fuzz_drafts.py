"""Fuzzing the public constructors and plan serialisation: bad input only ever raises a CharmemError.

Every draft, options and retrieval type is built from field values that are sometimes valid,
sometimes hostile text (any plane, NUL, lone surrogates, metacharacters), odd datetimes (naive,
sub-minute or out-of-range offsets, the ends of the calendar) and sometimes values of the wrong
type. The property: construction, ``prepare`` and the plan's JSON round trip either succeed or raise
a :class:`~charmem.CharmemError` (``DraftValidationError`` is also a ``ValueError`` by design),
never a bare ``TypeError``/``ValueError``/``OverflowError``; and what succeeds round-trips exactly.

``CHARMEM_FUZZ_EXAMPLES=N`` turns these into a long random run (``benchmarks/fuzz.py``).
"""

from __future__ import annotations

import functools
import json
import traceback
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import attrs
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from charmem import (
    BeliefAssertion,
    CharmemError,
    CommitOptions,
    CorrectionTarget,
    CorrectMemoryDraft,
    DerivedMemoryDraft,
    DerivedType,
    EntityDraft,
    EpisodeDraft,
    ExternalSourceReference,
    ForgetMemoryDraft,
    GraphLimits,
    KnownAs,
    LinkDraft,
    MemoryId,
    ObservationDraft,
    PrepareOptions,
    Relation,
    RememberDrafts,
    RememberInput,
    RememberOptions,
    RememberWritePlan,
    ReplacementDerivedMemoryDraft,
    RetrievalContext,
    Scene,
    SceneParticipant,
    SceneSetting,
    Settings,
    SourceProvenanceReference,
    ThreadDraft,
)
from charmem.domain.model import ObjectType
from charmem.usecases.planning import build_plan
from charmem_contract.strategies import (
    MiB,
    any_value,
    fuzz_settings,
    instants,
    lone_surrogate_texts,
    memory_texts,
    pooled_ids,
    raw_texts,
)

_TEXT_FIELDS = {
    "text",
    "summary",
    "title",
    "raw_ref",
    "rationale",
    "entity_type",
    "query",
    "name",
    "reference",
    "description",
    "key",
    "words",
}
_BOOL_FIELDS = {
    "given_by_application",
    "include_superseded",
    "include_suppressed",
    "apply_to_derived_from_target",
    "apply_to_thread_members",
}
_ENUMS: dict[str, type] = {
    "derived_type": DerivedType,
    "relation": Relation,
    "status": type(ThreadDraft(title="t").status),
    "kind": type(CorrectionTarget.derived_memory(MemoryId.new()).kind),
}


def _ids() -> st.SearchStrategy[Any]:
    return pooled_ids() | pooled_ids().map(str) | st.uuids() | raw_texts() | any_value()


def _id_lists() -> st.SearchStrategy[Any]:
    return (
        st.lists(pooled_ids() | pooled_ids().map(str), max_size=3)
        | st.lists(_ids(), max_size=2)
        | any_value()
    )


@functools.cache
def _field_values(name: str) -> st.SearchStrategy[Any]:
    """Mostly plausible, sometimes hostile or ill-typed values for the field ``name``."""
    if name in _TEXT_FIELDS:
        return raw_texts() | any_value()
    if name.endswith("_at") or name in ("now", "as_of"):
        return instants() | any_value()
    if name in _BOOL_FIELDS:
        return st.booleans() | any_value()
    if name in _ENUMS:
        values = [member.value for member in _ENUMS[name]]  # type: ignore[attr-defined]
        return st.sampled_from(values) | st.sampled_from(values).map(str.upper) | raw_texts() | any_value()
    if name == "salience" or name == "score_floor":
        return st.floats() | st.integers(-2, 2) | any_value()
    if name.endswith("_ids") or name in ("supersedes",):
        return _id_lists()
    if name == "id" or name.endswith("_id"):
        return _ids()
    if name == "assertions":
        return (
            st.lists(
                st.builds(BeliefAssertion, pooled_ids(), st.builds(KnownAs, memory_texts(huge=False))),
                max_size=2,
            )
            | any_value()
        )
    if name in ("object_type_defaults", "allowed_object_types"):
        return st.lists(st.sampled_from([t.value for t in ObjectType]), max_size=3) | any_value()
    if name == "allowed_relation_types":
        return st.lists(st.sampled_from([r.value for r in Relation]), max_size=3) | any_value()
    if name == "section_limits":
        return (
            st.dictionaries(
                st.sampled_from(["preferences", "open_loops", "nope"]) | st.text(max_size=4),
                st.integers(-1, 9) | any_value(),
                max_size=2,
            )
            | any_value()
        )
    if name == "scene":
        return _scenes() | any_value()
    if name == "participants":
        return st.lists(_participants(), max_size=2) | any_value()
    if name == "custom_values":
        return st.dictionaries(raw_texts(), raw_texts(), max_size=2) | any_value()
    if name == "external_refs":
        return st.lists(raw_texts(), max_size=2) | any_value()
    return st.integers(-2, 50) | any_value()


def _participants() -> st.SearchStrategy[SceneParticipant]:
    return st.builds(
        SceneParticipant,
        entity_id=st.none() | pooled_ids(),
        name=memory_texts(huge=False),
        description=st.none() | memory_texts(huge=False),
    )


def _scenes() -> st.SearchStrategy[Scene]:
    """Valid scenes: any valid instant, participants, a setting, custom values."""
    return st.builds(
        Scene,
        at=st.datetimes(  # valid_instants() also draws IANA zones' sub-minute local mean times
            datetime(2, 1, 1),
            datetime(9998, 12, 31),
            timezones=st.integers(-14 * 60, 14 * 60).map(lambda m: timezone(timedelta(minutes=m))),
        ),
        participants=st.lists(_participants(), max_size=3),
        setting=st.none()
        | st.builds(SceneSetting, key=memory_texts(huge=False), words=st.none() | memory_texts(huge=False)),
        custom_values=st.dictionaries(
            memory_texts(huge=False), memory_texts(huge=False) | st.just(""), max_size=2
        ),
    )


@st.composite
def _kwargs(
    draw: st.DrawFn, cls: type, fixed: dict[str, st.SearchStrategy[Any]] | None = None
) -> dict[str, Any]:
    """Keyword arguments for ``cls``: every required field, and each optional one half the time."""
    found: dict[str, Any] = {}
    for field in attrs.fields(cls):
        name = field.name.lstrip("_")
        required = field.default is attrs.NOTHING
        if not required and not draw(st.booleans()):
            continue
        strategy = fixed[name] if fixed and name in fixed else _field_values(name)
        found[name] = draw(strategy)
    return found


def _build(cls: Callable[..., Any], kwargs: dict[str, Any]) -> Any:
    """``cls(**kwargs)``; positional-only attrs fields are passed by keyword all the same."""
    return cls(**kwargs)


def _typed_or_fail(action: Callable[[], Any]) -> Any:
    """Run ``action``; a CharmemError is an accepted refusal, anything else fails the test."""
    try:
        return action()
    except CharmemError:
        return None
    except Exception as exc:  # noqa: BLE001 - the property under test
        pytest.fail(f"untyped {type(exc).__name__} escaped: {exc!r}\n{traceback.format_exc()}")


_SIMPLE = (
    EpisodeDraft,
    ObservationDraft,
    EntityDraft,
    ThreadDraft,
    DerivedMemoryDraft,
    LinkDraft,
    RememberInput,
    KnownAs,
    BeliefAssertion,
    RetrievalContext,
    GraphLimits,
    ForgetMemoryDraft,
    CorrectionTarget,
    ReplacementDerivedMemoryDraft,
    SourceProvenanceReference,
    ExternalSourceReference,
    PrepareOptions,
    CommitOptions,
    RememberOptions,
    Scene,
    SceneParticipant,
    SceneSetting,
)


def _case(cls: type) -> st.SearchStrategy[tuple[type, dict[str, Any]]]:
    return st.tuples(st.just(cls), _kwargs(cls))


_REGRESSIONS: list[tuple[type, dict[str, Any]]] = [
    # fuzz findings, kept: each raised a bare OverflowError/TypeError/AttributeError before
    (EpisodeDraft, {"occurred_at": datetime(1, 1, 1, tzinfo=timezone(timedelta(hours=14)))}),
    (EpisodeDraft, {"created_at": datetime(9999, 12, 31, 23, 59, tzinfo=timezone(timedelta(hours=-1)))}),
    (EpisodeDraft, {"occurred_at": datetime(2024, 1, 1, tzinfo=timezone(timedelta(seconds=1)))}),
    (EpisodeDraft, {"participant_entity_ids": 5}),
    (SourceProvenanceReference, {"external_refs": 5}),
    (DerivedMemoryDraft, {"derived_type": "claim", "text": "x", "given_by_application": "no"}),
    (RememberOptions, {"prepare": "now"}),
    (RetrievalContext, {"query": "q", "graph_limits": "deep"}),
]


@fuzz_settings(150)
@given(case=st.sampled_from(_SIMPLE).flatmap(_case))
def test_constructors_raise_only_typed_errors(case: tuple[type, dict[str, Any]]) -> None:
    cls, kwargs = case
    _typed_or_fail(lambda: _build(cls, kwargs))


for _regression in _REGRESSIONS:
    test_constructors_raise_only_typed_errors = example(case=_regression)(
        test_constructors_raise_only_typed_errors
    )


@pytest.mark.parametrize(("cls", "kwargs"), _REGRESSIONS)
def test_fuzz_findings_are_refused_with_a_typed_error(cls: type, kwargs: dict[str, Any]) -> None:
    with pytest.raises(CharmemError):
        cls(**kwargs)


@fuzz_settings(60)
@given(
    data=st.data(),
    target=_ids(),
    rationale=raw_texts() | any_value(),
)
def test_lifecycle_drafts_raise_only_typed_errors(data: st.DataObject, target: Any, rationale: Any) -> None:
    _typed_or_fail(lambda: ForgetMemoryDraft.suppress(target, rationale))
    _typed_or_fail(lambda: CorrectionTarget.source_object(target))
    replacement = data.draw(_kwargs(ReplacementDerivedMemoryDraft))
    origin = data.draw(_kwargs(SourceProvenanceReference))

    def correct() -> CorrectMemoryDraft:
        draft = CorrectMemoryDraft(CorrectionTarget.derived_memory(target), rationale)
        built_origin = SourceProvenanceReference(**origin)
        return attrs.evolve(
            draft.with_replacement(ReplacementDerivedMemoryDraft(**replacement)),
            correction_origin=built_origin,
        )

    _typed_or_fail(correct)


def _drafts(
    kind: type, fixed: dict[str, st.SearchStrategy[Any]] | None = None
) -> st.SearchStrategy[list[Any]]:
    """Lists of drafts of ``kind`` that built (ill-typed kwargs are dropped here: tested above)."""

    def build(kwargs: dict[str, Any]) -> Any:
        try:
            return kind(**kwargs)
        except CharmemError:
            return None

    return st.lists(_kwargs(kind, fixed).map(build), max_size=3).map(
        lambda items: [i for i in items if i is not None]
    )


_VALID = {
    "text": memory_texts(huge=False),
    "summary": memory_texts(huge=False) | st.just(""),
    "title": memory_texts(huge=False),
    "entity_type": memory_texts(huge=False),
    "raw_ref": st.none() | memory_texts(huge=False),
    "rationale": st.none() | memory_texts(huge=False),
    "occurred_at": st.none() | instants(naive=False),
    "observed_at": st.none() | instants(naive=False),
    "created_at": st.none() | instants(naive=False),
    "recorded_at": st.none() | instants(naive=False),
    "id": st.none() | pooled_ids(),
    "episode_id": pooled_ids(),
    "from_id": pooled_ids(),
    "to_id": pooled_ids(),
    "speaker_entity_id": st.none() | pooled_ids(),
    "salience": st.none() | st.floats(0, 1),
    "given_by_application": st.booleans(),
    "relation": st.sampled_from(list(Relation)),
    "derived_type": st.sampled_from(list(DerivedType)),
    "scene": st.none() | _scenes(),
}


@fuzz_settings(40)
@given(
    episodes=_drafts(EpisodeDraft, _VALID),
    observations=_drafts(ObservationDraft, _VALID),
    entities=_drafts(EntityDraft, _VALID),
    threads=_drafts(ThreadDraft, _VALID),
    derived=_drafts(DerivedMemoryDraft, _VALID),
    links=_drafts(LinkDraft, _VALID),
    now=instants(naive=False),
)
@example(  # a 1 MiB text of metacharacters, and an id shared by an entity and an episode
    episodes=[EpisodeDraft(id=MemoryId.deterministic("charmem-fuzz-pool", 0), summary="\u2028\x00")],
    observations=[
        ObservationDraft(
            text=('"""} ; DROP ALL ; #\x00\u2028' * (MiB // 16 + 1))[:MiB],
            episode_id=MemoryId.deterministic("charmem-fuzz-pool", 0),
        )
    ],
    entities=[EntityDraft(id=MemoryId.deterministic("charmem-fuzz-pool", 0), entity_type="<urn:x>")],
    threads=[],
    derived=[],
    links=[],
    now=datetime(9999, 12, 31, 23, 59, tzinfo=timezone(timedelta(hours=14))),
)
def test_prepared_plans_round_trip_through_json_exactly(
    episodes: list[Any],
    observations: list[Any],
    entities: list[Any],
    threads: list[Any],
    derived: list[Any],
    links: list[Any],
    now: datetime,
) -> None:
    drafts = RememberDrafts(
        episodes=episodes,
        observations=observations,
        entities=entities,
        threads=threads,
        derived=derived,
        links=links,
    )
    plan = _typed_or_fail(lambda: build_plan("fuzz", drafts, now))
    if plan is None:
        return
    text = plan.to_json()
    again = RememberWritePlan.from_json(text)
    assert again == plan
    assert again.to_json() == text
    for before, after in zip(plan.objects, again.objects, strict=True):
        for name in ("text", "summary", "title", "entity_type", "raw_ref"):
            if hasattr(before, name):
                assert getattr(after, name) == getattr(before, name)
                assert type(getattr(after, name)) is type(getattr(before, name))


@fuzz_settings(60)
@given(
    text=st.one_of(
        raw_texts(),
        st.binary(max_size=20),
        st.none(),
        st.integers(),
        st.just("[" * 100_000 + "]" * 100_000),
        st.just('{"format_version": 1, "collection": "x", "objects": 5}'),
        st.recursive(
            st.none() | st.integers() | st.text(max_size=3),
            lambda inner: (
                st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
            ),
        ).map(lambda value: json.dumps({"format_version": 1, "plan": value})),
        lone_surrogate_texts().map(lambda s: '{"format_version": 1, "collection": "' + s + '"}'),
    )
)
def test_plan_json_from_anywhere_raises_only_typed_errors(text: Any) -> None:
    _typed_or_fail(lambda: RememberWritePlan.from_json(text))


_SETTING_KEYS = (
    "VECTOR_STORE_MODE",
    "VECTOR_STORE_PATH",
    "QDRANT_CONNECTION_STRING",
    "GRAPH_STORE_MODE",
    "OXIGRAPH_PATH",
    "SPARQL_QUERY_ENDPOINT",
    "RETRIEVAL_STATS_STORE_MODE",
    "RETRIEVAL_STATS_PATH",
    "EMBEDDING_PROVIDER",
    "EMBEDDING_DIMENSIONS",
    "LOG_MEMORY_TEXT",
)
_MODE_VALUES = ("embedded", "service", "in_memory", "persistent", "reference", "sqlite", "openai", "local")
_SETTING_VALUES = st.sampled_from(
    [*_MODE_VALUES, "hashing", "true", "0", "-3", "12", "http://127.0.0.1:1/q", "./data/x", "a\x00b", " "]
)


@fuzz_settings(100)
@given(
    mapping=st.dictionaries(
        st.sampled_from(_SETTING_KEYS) | st.text(max_size=4),
        _SETTING_VALUES | raw_texts() | any_value(),
        max_size=6,
    )
    | any_value(),
    root=st.text(max_size=6),
)
@example(mapping={"OXIGRAPH_PATH": "a\x00b"}, root="x")  # was a bare ValueError when opened
@example(mapping={"GRAPH_STORE_MODE": 5}, root="x")  # was an AttributeError
def test_settings_from_any_mapping_raise_only_configuration_errors(mapping: Any, root: str) -> None:
    settings = _typed_or_fail(lambda: Settings.from_mapping(mapping))
    if settings is not None:
        for path in (settings.oxigraph_path, settings.vector_store_path, settings.retrieval_stats_path):
            assert "\x00" not in str(path)
        _typed_or_fail(settings.require_embedding_keys)
        _typed_or_fail(lambda: settings.with_store_root(Path(root)))
