"""`ir.unionfind.UnionFind` against a reference that keeps the groups as plain sets."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from edgesynth.ir.unionfind import UnionFind

NAMES = st.sampled_from("abcdefgh")


@given(st.lists(st.lists(NAMES, min_size=1, max_size=4), max_size=12), st.lists(NAMES))
def test_groups_and_representatives_match_a_set_model(unions, probes) -> None:
    uf = UnionFind()
    groups: list[tuple[set[str], str]] = []  # (members, representative)

    def group_of(name: str) -> int:
        for i, (members, _) in enumerate(groups):
            if name in members:
                return i
        groups.append(({name}, name))
        return len(groups) - 1

    for names in unions:
        first = groups[group_of(names[0])]
        merged = {n for name in names for n in groups[group_of(name)][0]}
        keep = first[1]
        groups[:] = [g for g in groups if not g[0] & merged] + [(merged, keep)]
        uf.union(*names)
    for name in [*probes, *(n for names in unions for n in names)]:
        members, representative = groups[group_of(name)]
        assert uf.find(name) == representative
        assert all(uf.find(other) == representative for other in members)


def test_a_new_name_is_its_own_group() -> None:
    uf = UnionFind()
    uf.union("a", "b")
    assert uf.find("c") == "c" and uf.find("b") == "a"
