"""Union-find over names: the groups of tensors that must share something (one scale, one
number format). A name not seen before is a group of its own."""

from __future__ import annotations


class UnionFind:
    def __init__(self) -> None:
        self.parent: dict[str, str] = {}

    def find(self, name: str) -> str:
        """The representative of `name`'s group (path halving)."""
        self.parent.setdefault(name, name)
        while self.parent[name] != name:
            self.parent[name] = self.parent[self.parent[name]]
            name = self.parent[name]
        return name

    def union(self, first: str, *others: str) -> None:
        """Merge the groups of all the names; the group of `first` keeps its representative."""
        roots = [self.find(n) for n in (first, *others)]
        for root in roots[1:]:
            self.parent[root] = roots[0]
