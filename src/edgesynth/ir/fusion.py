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

A tree pattern (`tree`) reads the graph backward, from tensors a layer reads towards their
producers, and an operator may have several operands:

    tree("eltwise", "clip?int8(eltwise!device([pool!alike]*))")

Each member names the operator producing a tensor (as in a chain), and in parentheses what
produces that operator's inputs: `x*` every input matches `x`; `x, y` one pattern per input, in
order, `_` a tensor taken as it is; no parentheses, every input is taken as it is. `[...]`
marks an optional member with all below it: when it does not match (the whole of it), the
tensor is taken as it is. After a member's operators come, in this order, `&` (its output may
have other readers and be a graph output, its guard if any decides; without `&` the operator
reading it in the pattern is its only reader, however many times, and it is no graph output),
`?name` (a guard the target gives: a predicate that must accept the operator, told the
operators matched before it) and `!name` (a refusal the target gives, checked when the match
is taken). The pattern's own trailing `*` matches each of several tensors (a layer's operands).

`Matcher.match` gives the operators found (in pre-order: a member before what produces its
inputs) and the leaves, the tensors taken as they are with the operator that reads them (the
edges the layer reads); `first` the first of several patterns that matches. A match is taken
in steps (`TreeMatch.take`): a member with the required members below it, each optional member
and each top tensor starting a new step; a step's refusals run before any operator of it is
taken, so a refusal leaves the earlier steps taken.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import NamedTuple

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
        self.producers: dict[str, g.Node] = {}
        for node in graph.nodes:
            for t in node.inputs:
                self.readers.setdefault(t, []).append(node)
            for t in node.outputs:
                self.producers.setdefault(t, node)

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

    def only_reader(self, edge: Edge) -> bool:
        """Is `edge.reader` the one operator reading `edge.tensor` (however many times), and
        the tensor no graph output? (No reader given: yes.)"""
        if edge.reader is None:
            return True
        if edge.tensor in self.graph.outputs:
            return False
        return {n.name for n in self.readers.get(edge.tensor, [])} == {edge.reader.name}

    def match(
        self,
        pat: TreePattern,
        edges: Sequence[Edge],
        taken: Collection[str] = (),
        guards: Mapping[str, Guard] | None = None,
    ) -> TreeMatch | None:
        """`pat` matched backward from `edges` (one, or each of them for a pattern with a
        trailing `*`), None if a required member is missing; `taken` operators never match."""
        if not pat.each and len(edges) != 1:
            raise ValueError(f"pattern {pat.name} matches one tensor, not {len(edges)}")
        walk = _Walk(self, taken, guards or {})
        if not all(walk.item(pat.root, edge, top=True) for edge in edges):
            return None
        return TreeMatch(pat, tuple(tuple(step) for step in walk.steps), tuple(walk.leaves))

    def first(
        self,
        patterns: Sequence[TreePattern],
        edges: Sequence[Edge],
        taken: Collection[str] = (),
        guards: Mapping[str, Guard] | None = None,
    ) -> TreeMatch | None:
        """The match of the first of `patterns` that matches, None if none does."""
        for pat in patterns:
            found = self.match(pat, edges, taken, guards)
            if found is not None:
                return found
        return None

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


# -- tree patterns: backward, several operands -------------------------------------------------


class Edge(NamedTuple):
    """A tensor and the operator that reads it (None: whoever reads it, unchecked)."""

    tensor: str
    reader: g.Node | None


Guard = Callable[[g.Node, Collection[str]], bool]  # the operator, the names matched before it


@dataclass(frozen=True)
class Branch:
    """One member of a tree pattern and what produces its operator's inputs."""

    ops: tuple[str, ...]  # `op` or `op:kind` names
    optional: bool = False
    shared: bool = False  # other readers allowed (its guard decides)
    guard: str | None = None
    refuse: str | None = None
    each: Branch | None = None  # every input matches this
    inputs: tuple[Branch | None, ...] | None = None  # one per input (None: taken as it is)

    def takes(self, node: g.Node) -> bool:
        return any(name in self.ops for name in node.op_names)

    def __str__(self) -> str:
        text = "|".join(self.ops) + "&" * self.shared
        text += f"?{self.guard}" * (self.guard is not None)
        text += f"!{self.refuse}" * (self.refuse is not None)
        if self.each is not None:
            text += f"({self.each}*)"
        elif self.inputs is not None:
            text += "(" + ", ".join("_" if b is None else str(b) for b in self.inputs) + ")"
        return f"[{text}]" if self.optional else text


@dataclass(frozen=True)
class TreePattern:
    name: str
    root: Branch
    each: bool = False  # the root matches each of several tensors

    def __str__(self) -> str:
        return f"{self.name}: {self.root}" + "*" * self.each


Step = tuple[tuple[g.Node, Branch], ...]


@dataclass(frozen=True)
class TreeMatch:
    pattern: TreePattern
    steps: tuple[Step, ...]
    leaves: tuple[Edge, ...]  # the tensors taken as they are, in order

    @property
    def nodes(self) -> tuple[g.Node, ...]:
        """The operators matched, in pre-order."""
        return tuple(node for step in self.steps for node, _ in step)

    def take(self, refuse: Callable[[str, g.Node], None], take: Callable[[g.Node], None]) -> None:
        """Step by step (module docstring): `refuse(name, node)` for each refusal a step's
        members name (it raises to refuse), then `take(node)` for each of its operators."""
        for step in self.steps:
            for node, branch in step:
                if branch.refuse is not None:
                    refuse(branch.refuse, node)
            for node, _ in step:
                take(node)


_WORD = re.compile(r"(?P<ops>[\w:|]+?)(?P<shared>&)?(?:\?(?P<guard>\w+))?(?:!(?P<refuse>\w+))?")


class _Text:
    """A tree pattern's text, read left to right (see the module docstring)."""

    def __init__(self, name: str, text: str) -> None:
        self.name, self.text = name, text
        self.tokens = re.findall(r"[()\[\],*]|[^()\[\],*\s]+", text)
        self.pos = 0

    def fail(self, why: str) -> ValueError:
        return ValueError(f"pattern {self.name}: {why} in {self.text!r}")

    def eat(self, token: str) -> bool:
        if self.pos < len(self.tokens) and self.tokens[self.pos] == token:
            self.pos += 1
            return True
        return False

    def expect(self, token: str) -> None:
        if not self.eat(token):
            found = self.tokens[self.pos] if self.pos < len(self.tokens) else "the end"
            raise self.fail(f"`{token}` expected, not {found}")

    def item(self) -> Branch | None:
        if self.eat("_"):
            return None
        if self.eat("["):
            branch = self.branch()
            self.expect("]")
            return replace(branch, optional=True)
        return self.branch()

    def branch(self) -> Branch:
        word = self.tokens[self.pos] if self.pos < len(self.tokens) else ""
        m = _WORD.fullmatch(word)
        if m is None or not all(m["ops"].split("|")):
            raise self.fail(f"a member expected, not {word or 'the end'!r}")
        self.pos += 1
        b = Branch(tuple(m["ops"].split("|")), False, bool(m["shared"]), m["guard"], m["refuse"])
        if not self.eat("("):
            return b
        first = self.item()
        if self.eat("*"):
            if first is None:
                raise self.fail("`_*` is the same as no parentheses")
            b = replace(b, each=first)
        else:
            items = [first]
            while self.eat(","):
                items.append(self.item())
            b = replace(b, inputs=tuple(items))
        self.expect(")")
        return b


def tree(name: str, text: str) -> TreePattern:
    """A tree pattern from its text (see the module docstring)."""
    reader = _Text(name, text)
    root = reader.item()
    if root is None:
        raise reader.fail("the root must be a member")
    each = reader.eat("*")
    if reader.pos != len(reader.tokens):
        raise reader.fail(f"nothing may follow the root, not {reader.tokens[reader.pos]!r}")
    return TreePattern(name, root, each)


class _Walk:
    """One tree match in progress: the steps and leaves so far."""

    def __init__(
        self, matcher: Matcher, taken: Collection[str], guards: Mapping[str, Guard]
    ) -> None:
        self.matcher, self.taken, self.guards = matcher, taken, guards
        self.steps: list[list[tuple[g.Node, Branch]]] = []
        self.leaves: list[Edge] = []
        self.names: set[str] = set()

    def item(self, branch: Branch | None, edge: Edge, top: bool = False) -> bool:
        """Match `branch` on `edge` (None: a leaf); False if a required member is missing."""
        if branch is None:
            self.leaves.append(edge)
            return True
        steps, leaves = len(self.steps), len(self.leaves)
        if self.member(branch, edge, top or branch.optional):
            return True
        if not branch.optional:
            return False  # the nearest optional member above undoes it
        del self.steps[steps:], self.leaves[leaves:]
        self.names = {node.name for step in self.steps for node, _ in step}
        self.leaves.append(edge)
        return True

    def member(self, branch: Branch, edge: Edge, new_step: bool) -> bool:
        node = self.matcher.producers.get(edge.tensor)
        if node is None or node.name in self.taken or node.name in self.names:
            return False
        if not branch.takes(node):
            return False
        if not branch.shared and not self.matcher.only_reader(edge):
            return False
        if branch.guard is not None and not self.guard(branch.guard)(node, self.names):
            return False
        if new_step:
            self.steps.append([])
        self.steps[-1].append((node, branch))
        self.names.add(node.name)
        if branch.each is not None:
            return all(self.item(branch.each, Edge(t, node)) for t in node.inputs)
        if branch.inputs is None:
            self.leaves.extend(Edge(t, node) for t in node.inputs)
            return True
        if len(branch.inputs) != len(node.inputs):
            return False
        return all(
            self.item(b, Edge(t, node)) for b, t in zip(branch.inputs, node.inputs, strict=True)
        )

    def guard(self, name: str) -> Guard:
        if name not in self.guards:
            raise ValueError(f"no guard `{name}` given (guards: {sorted(self.guards)})")
        return self.guards[name]
