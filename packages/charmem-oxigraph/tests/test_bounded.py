"""The graph cache's bounded maps: a full map forgets its oldest entries, and reads see the rest."""

from __future__ import annotations

from charmem_oxigraph._bounded import BoundedMap


def test_a_full_map_forgets_its_oldest_entries_and_reads_see_every_kept_one() -> None:
    held: BoundedMap[int, str] = BoundedMap(16)
    for key in range(100):  # several rebuilds of the underlying dict
        held.put(key, str(key))
        assert held.get(key) == str(key)
    assert len(held) <= 16
    assert held.get(0) is None
    assert held.get(99) == "99"
    assert all(held.get(key) == str(key) for key in range(100 - len(held), 100))
    held.pop(99)
    assert held.get(99) is None
    held.clear()
    assert len(held) == 0
    assert held.get(98) is None
