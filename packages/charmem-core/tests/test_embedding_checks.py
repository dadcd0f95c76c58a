"""What core accepts from an embedding provider, row by row (``charmem.usecases.embedding``).

The check has a fast path for plain float and int rows and an element-by-element path for
everything else; both must give the same verdicts.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from decimal import Decimal
from fractions import Fraction
from typing import Any

import pytest

from charmem.errors import BackendError, DimensionMismatchError
from charmem.usecases.embedding import embed_cue, embed_texts


class Rows:
    """A provider answering fixed rows (``vector_size`` 3)."""

    model_id = "fixed-rows"
    vector_size = 3

    def __init__(self, *rows: Any) -> None:
        self.rows = list(rows)

    async def embed_documents(self, texts: Sequence[str]) -> list[Any]:
        return self.rows[: len(texts)]

    async def embed_query(self, text: str) -> Any:
        return self.rows[0]


class ToList:
    """A row object that is no sequence but has ``tolist()`` (like a numpy array)."""

    def __init__(self, values: list[Any]) -> None:
        self.values = values

    def tolist(self) -> list[Any]:
        return list(self.values)


@pytest.mark.parametrize(
    ("row", "expected"),
    [
        ([0.5, -1.0, 2.25], [0.5, -1.0, 2.25]),
        ([1, 2, 3], [1.0, 2.0, 3.0]),
        ([1, 0.5, -2], [1.0, 0.5, -2.0]),
        ((0.1, 0.2, 0.3), [0.1, 0.2, 0.3]),
        (ToList([0.25, 1, 0.0]), [0.25, 1.0, 0.0]),
        ([Fraction(1, 2), Decimal("0.25"), 1.0], None),  # Fraction is Real; Decimal is not
        ([Fraction(1, 2), 0.25, 1.0], [0.5, 0.25, 1.0]),
        # finite values whose sum overflows: still finite, still accepted
        ([1e308, 1e308, -1.0], [1e308, 1e308, -1.0]),
    ],
)
async def test_rows_of_real_numbers_come_back_as_float_lists(row: Any, expected: list[float] | None) -> None:
    if expected is None:
        with pytest.raises(BackendError, match="not real numbers"):
            await embed_texts(Rows(row), ["a"])
        return
    [checked] = await embed_texts(Rows(row), ["a"])
    assert checked == expected
    assert all(type(value) is float for value in checked)
    assert checked is not row  # a list of its own, not the provider's


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ([math.nan, 0.0, 0.0], "NaN or infinite"),
        ([0.0, math.inf, 0.0], "NaN or infinite"),
        ([0.0, 1.0, -math.inf], "NaN or infinite"),
        ([math.inf, -math.inf, 1.0], "NaN or infinite"),
        ([1e308, 1e308, math.nan], "NaN or infinite"),
        ([1, 2, math.nan], "NaN or infinite"),
        ([True, 0.0, 0.0], "not real numbers"),
        ([1.0, False, 0.0], "not real numbers"),
        ([True, False, True], "not real numbers"),
        (["0.5", 0.0, 0.0], "not real numbers"),
        ([None, 0.0, 0.0], "not real numbers"),
        ([1j, 0.0, 0.0], "not real numbers"),
        (ToList([True, 0.0, 1.0]), "not real numbers"),
        ("abc", "not a sequence"),
        (None, "not a sequence"),
    ],
)
async def test_rows_that_break_the_contract_are_refused(row: Any, message: str) -> None:
    with pytest.raises(BackendError, match=message):
        await embed_texts(Rows(row), ["a"])
    with pytest.raises(BackendError, match=message):
        await embed_cue(Rows(row), "a")


async def test_a_row_of_another_length_is_a_dimension_mismatch() -> None:
    with pytest.raises(DimensionMismatchError) as caught:
        await embed_texts(Rows([0.5, 0.5, 0.5], [0.5, 0.5]), ["a", "b"])
    assert (caught.value.expected, caught.value.actual) == (3, 2)
    assert "row 1" in str(caught.value)
