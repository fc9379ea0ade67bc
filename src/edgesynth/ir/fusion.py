"""Fusion patterns as data, and the one matcher every target's fuser uses.

A pattern is a name and a sequence of members, written as text:

    pattern("conv", "conv [batchnorm] [activation:relu|clip] [pool:max]")

Each member names the operators it takes, by `op` or `op:kind` (`activation:relu` takes only a
ReLU), alternatives separated by `|`; `[...]` marks a member that may be missing and a
trailing `*` one that may repeat (zero or more times). The first member is the chain's head.
A chain follows the graph forward: each next operator is the only reader of the previous
one's output, and that output is no graph output (a value read elsewhere must be stored).

`follow` extends a chain from a head the fuser chose (the longest chain the pattern allows),
`longest` the longest of several patterns; `find` covers a graph with maximal non-overlapping
chains in topological order (at each operator not yet taken, the longest chain of any pattern;
the first pattern listed wins a tie). Each target lists its patterns as a table in its own lowering.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from edgesynth.ir import graph as g


@dataclass(frozen=True)
class Member:
    ops: tuple[str, ...]  # `op` or `op:kind` names
    optional: bool = False
    repeat: bool = False

    def takes(self, node: g.Node) -> bool:
        return any(name in self.ops for name in node.op_names)


@dataclass(frozen=True)
class Pattern:
    name: str
    members: tuple[Member, ...]

    def __str__(self) -> str:
        return f"{self.name}: " + " ".join(_member_text(m) for m in self.members)


@dataclass(frozen=True)
class Match:
    pattern: Pattern
    nodes: tuple[g.Node, ...]

    @property
    def head(self) -> g.Node:
        return self.nodes[0]

    @property
    def output(self) -> str:
        return self.nodes[-1].output


def pattern(name: str, text: str) -> Pattern:
    """A pattern from its text (see the module docstring)."""
    members = []
    for word in text.split():
        repeat = word.endswith("*")
        word = word.rstrip("*")
        optional = word.startswith("[") and word.endswith("]")
        ops = tuple(word.strip("[]").split("|"))
        if not all(ops):
            raise ValueError(f"pattern {name}: empty member in {text!r}")
        members.append(Member(ops, optional or repeat, repeat))
    if not members or members[0].optional:
        raise ValueError(f"pattern {name}: the first member of {text!r} must be required")
    return Pattern(name, tuple(members))


def _member_text(m: Member) -> str:
    ops = "|".join(m.ops)
    return f"[{ops}]*" if m.repeat else f"[{ops}]" if m.optional else ops


class Matcher:
    """The graph's readers, once; `taken` operators never join a chain."""

    def __init__(self, graph: g.Graph) -> None:
        self.graph = graph
        self.readers: dict[str, list[g.Node]] = {}
        for node in graph.nodes:
            for t in node.inputs:
                self.readers.setdefault(t, []).append(node)

    def next_of(self, node: g.Node, taken: Collection[str] = ()) -> g.Node | None:
        """The only reader of `node`'s output (None if several, none, or a graph output)."""
        if len(node.outputs) != 1 or node.output in self.graph.outputs:
            return None
        readers = self.readers.get(node.output, [])
        if len(readers) != 1 or readers[0].name in taken:
            return None
        return readers[0]

    def follow(self, head: g.Node, pat: Pattern, taken: Collection[str] = ()) -> list[g.Node]:
        """The longest chain of `pat` starting at `head` (empty if the pattern does not match)."""
        if not pat.members[0].takes(head):
            return []
        rest = self._rest(head, pat.members[1:], taken)
        return [] if rest is None else [head, *rest]

    def _rest(
        self, last: g.Node, members: Sequence[Member], taken: Collection[str]
    ) -> list[g.Node] | None:
        """The longest continuation after `last` over `members`, None if a required member is
        missing (backtracking over the optional and repeated ones; taking wins a tie)."""
        if not members:
            return []
        first, others = members[0], list(members[1:])
        options: list[list[g.Node]] = []
        nxt = self.next_of(last, taken)
        if nxt is not None and first.takes(nxt):
            tail = self._rest(nxt, [first, *others] if first.repeat else others, taken)
            if tail is not None:
                options.append([nxt, *tail])
        if first.optional:
            skipped = self._rest(last, others, taken)
            if skipped is not None:
                options.append(skipped)
        return max(options, key=len) if options else None

    def longest(
        self, head: g.Node, patterns: Sequence[Pattern], taken: Collection[str] = ()
    ) -> Match | None:
        """The longest chain any of `patterns` makes from `head` (the first listed wins a tie),
        None if none matches."""
        best: Match | None = None
        for pat in patterns:
            chain = self.follow(head, pat, taken)
            if chain and (best is None or len(chain) > len(best.nodes)):
                best = Match(pat, tuple(chain))
        return best

    def find(self, patterns: Sequence[Pattern], taken: Collection[str] = ()) -> list[Match]:
        """Maximal non-overlapping chains, in the graph's order (see the module docstring)."""
        used = set(taken)
        matches: list[Match] = []
        for node in self.graph.nodes:
            if node.name in used:
                continue
            best = self.longest(node, patterns, used)
            if best is not None:
                used.update(n.name for n in best.nodes)
                matches.append(best)
        return matches
