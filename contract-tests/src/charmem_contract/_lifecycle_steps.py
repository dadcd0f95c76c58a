"""What the lifecycle tests share: the instant ``T0`` and the steps that build their worlds."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from charmem import (
    BeliefAssertion,
    CorrectionTarget,
    CorrectMemoryDraft,
    CurrencyStatus,
    DerivedMemoryDraft,
    DerivedType,
    EntityDraft,
    ForgetMemoryDraft,
    KnownAs,
    MemoryId,
    RememberDrafts,
    RememberInput,
    ReplacementDerivedMemoryDraft,
    RetrievalContext,
    SourceProvenanceReference,
)
from charmem.testing import stores_of

__all__ = ["T0", "LifecycleSteps"]


T0 = datetime(2024, 3, 1, 9, 0, tzinfo=UTC)


class LifecycleSteps:
    """The steps the lifecycle tests build their worlds with (static helpers on the test class)."""

    @staticmethod
    async def _notion_with_name(memory: Any, name: str) -> tuple[MemoryId, MemoryId]:
        notion, belief = MemoryId.new(), MemoryId.new()
        await memory.remember(
            RememberDrafts(
                entities=[EntityDraft(id=notion, entity_type="person", created_at=T0)],
                derived=[
                    DerivedMemoryDraft(
                        DerivedType.REFLECTION,
                        f"I know this notion as {name}.",
                        id=belief,
                        entity_ids=[notion],
                        assertions=[BeliefAssertion(notion, KnownAs(name))],
                        given_by_application=True,
                        created_at=T0,
                    )
                ],
            )
        )
        return notion, belief

    @staticmethod
    async def _grounded_belief(
        memory: Any, text: str, belief: str, *, created_at: datetime | None = None
    ) -> tuple[MemoryId, MemoryId, MemoryId]:
        """An episode with one observation and a claim derived from it: (episode, obs, claim).

        ``created_at`` defaults to the memory's clock (for all three).
        """
        outcome = await memory.remember(
            RememberInput(text, occurred_at=T0, created_at=created_at).with_derived_memory(
                DerivedMemoryDraft(DerivedType.CLAIM, belief, created_at=created_at)
            )
        )
        episode, observation, claim = outcome.object_ids
        return episode, observation, claim

    @staticmethod
    async def _status(memory: Any, memory_id: MemoryId) -> CurrencyStatus | None:
        statuses: dict[MemoryId, CurrencyStatus] = await stores_of(memory).graph.currency([memory_id])
        return statuses.get(memory_id)

    @staticmethod
    async def _recalled(
        memory: Any, query: str, **options: Any
    ) -> tuple[dict[MemoryId, Any], dict[MemoryId, str]]:
        """(item statuses by id, omission reasons by id) of one retrieval."""
        pack = await memory.retrieve(RetrievalContext(query=query, **options))
        return {item.id: item.status for item in pack.items}, {o.id: o.reason for o in pack.omissions}

    async def _forgotten_replaced_belief(self, memory: Any) -> tuple[MemoryId, MemoryId, MemoryId]:
        """Notion Ana (named), given belief B1 about her, corrected to B2, B2 forgotten: (ana, b1, b2)."""
        ana, _name = await self._notion_with_name(memory, "Ana")
        first = MemoryId.new()
        await memory.remember(
            RememberDrafts(
                derived=[
                    DerivedMemoryDraft(
                        DerivedType.USER_PREFERENCE,
                        "She loves jazz records.",
                        id=first,
                        entity_ids=[ana],
                        given_by_application=True,
                        created_at=T0,
                    )
                ]
            )
        )
        said = await memory.remember(RememberInput("Ana said she only listens to opera now.", occurred_at=T0))
        corrected = await memory.correct(
            CorrectMemoryDraft(
                CorrectionTarget.derived_memory(first),
                "She changed her taste.",
                correction_origin=SourceProvenanceReference(observation_ids=said.observation_ids),
            ).with_replacement(
                ReplacementDerivedMemoryDraft(
                    DerivedType.USER_PREFERENCE, "She loves opera.", entity_ids=[ana]
                )
            )
        )
        [second] = corrected.replacement_ids
        await memory.forget(ForgetMemoryDraft.suppress(second, "She asked us not to keep it."))
        return ana, first, second
