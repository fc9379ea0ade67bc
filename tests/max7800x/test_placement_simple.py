"""The placement rule that skips the solver (placement/simple.py): `edgesynth plan` on MNIST does
not import OR-Tools, the rule's answer has the objective the solver proves optimal, and the rule
answers only when its bound is reached and the network is plain."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import needs
from edgesynth.targets.max7800x.commands.plan_cmd import PlanOptions, run_plan
from edgesynth.targets.max7800x.placement import simple
from edgesynth.targets.max7800x.placement.problem import Problem
from edgesynth.targets.max7800x.placement.solve import Solution, kernel_instances

MNIST = needs.CORPUS / "cases" / "MAX78000" / "mnist"
SOLVE = sys.modules["edgesynth.targets.max7800x.placement.solve"]
CHECKPOINT = MNIST / "trained" / "ai85-mnist-qat8-q.pth.tar"

pytestmark = pytest.mark.usefixtures("corpus")  # fails when the corpus is missing


def _stripped_mnist(tmp_path: Path) -> Path:
    """The README's example: MNIST with every placement key left to edgesynth."""
    data = yaml.safe_load((MNIST / "networks" / "mnist-chw-ai85.yaml").read_text())
    for layer in data["layers"]:
        for key in ("processors", "output_processors", "in_offset", "out_offset"):
            layer.pop(key, None)
    path = tmp_path / "mnist.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def objective(problem: Problem, solution: Solution) -> tuple[int, int, int]:
    """The solver's objective, in its order: fullest kernel memory, highest data word used,
    sum of the blocks' first memory instances."""
    load = [0] * problem.instances
    for use in problem.kernels:
        block = problem.blocks[use.block]
        where = simple.presence(problem, block, solution.instance[use.block])
        if use.span is not None and block.fixed_map is None:
            where = kernel_instances(problem, use, solution.instance[use.block])
        for i in where:
            load[i] += use.words
    peak = max(solution.word[b.index] + b.words for b in problem.blocks)
    return max(load), peak, sum(solution.instance.values())


def _mnist_problem(tmp_path: Path, monkeypatch) -> tuple[Problem, list[int]]:
    """The placement problem `edgesynth plan` builds for MNIST, and its kernel capacity."""
    seen: list = []

    def capture(problem, capacity):
        seen.append((problem, list(capacity)))
        return None

    monkeypatch.setattr(SOLVE, "proven_placement", capture)
    monkeypatch.chdir(MNIST)
    run_plan(
        PlanOptions(network=_stripped_mnist(tmp_path), checkpoint=CHECKPOINT, device_check=False)
    )
    monkeypatch.undo()
    return seen[0]


def test_plan_on_mnist_does_not_import_ortools(tmp_path):
    yaml_path = _stripped_mnist(tmp_path)
    script = (
        "import sys\n"
        "from pathlib import Path\n"
        "from edgesynth.targets.max7800x.commands.plan_cmd import PlanOptions, run_plan\n"
        f"lines = run_plan(PlanOptions(network=Path({str(yaml_path)!r}), "
        f"checkpoint=Path({str(CHECKPOINT)!r})))\n"
        "assert 'optimal;' in lines[0], lines[0]\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('ortools', 'pandas')))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=MNIST, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "[]"


def test_the_rule_answers_mnist_with_the_objective_the_solver_proves(tmp_path, monkeypatch):
    problem, capacity = _mnist_problem(tmp_path, monkeypatch)
    proven = simple.proven_placement(problem, capacity)
    assert proven is not None
    rule = Solution(proven.instance, proven.word, optimal=True)
    monkeypatch.setattr(SOLVE, "proven_placement", lambda problem, capacity: None)
    solver = SOLVE.solve(problem, capacity)
    assert solver.optimal
    assert objective(problem, rule) == objective(problem, solver)


def test_the_rule_declines_when_no_arrangement_reaches_its_bound(tmp_path, monkeypatch):
    problem, capacity = _mnist_problem(tmp_path, monkeypatch)
    fit = simple.first_fit
    monkeypatch.setattr(
        simple,
        "first_fit",
        lambda present, order: {b: w + 1 for b, w in fit(present, order).items()},
    )
    assert simple.proven_placement(problem, capacity) is None
    monkeypatch.undo()
    assert simple.proven_placement(problem, capacity) is not None


@pytest.mark.parametrize(
    "change",
    [
        {"passthrough": [1]},
        {"allowed": {1: {0: [(0, 100)]}}},
    ],
    ids=["passthrough", "restricted offsets"],
)
def test_the_rule_declines_a_network_it_does_not_model(tmp_path, monkeypatch, change):
    problem, capacity = _mnist_problem(tmp_path, monkeypatch)
    assert simple.proven_placement(dataclasses.replace(problem, **change), capacity) is None


def test_the_rule_declines_a_lowered_kernel_capacity_it_cannot_meet(tmp_path, monkeypatch):
    problem, capacity = _mnist_problem(tmp_path, monkeypatch)
    assert simple.proven_placement(problem, [100] * len(capacity)) is None


def test_a_search_round_after_the_first_goes_to_the_solver(tmp_path, monkeypatch):
    problem, capacity = _mnist_problem(tmp_path, monkeypatch)

    def refuse(problem, capacity):
        raise AssertionError("the rule ran in a later round")

    monkeypatch.setattr(SOLVE, "proven_placement", refuse)
    assert SOLVE.solve(problem, capacity, {0: {5}}).optimal
    assert SOLVE.solve(problem, capacity, kernel_columns=True).optimal


def test_the_rounds_of_a_search_share_one_model_and_answer_as_fresh_ones(tmp_path, monkeypatch):
    problem, capacity = _mnist_problem(tmp_path, monkeypatch)
    monkeypatch.setattr(SOLVE, "proven_placement", lambda problem, capacity: None)
    built = []
    model_init = SOLVE._Model.__init__
    monkeypatch.setattr(
        SOLVE._Model, "__init__", lambda self, *a: built.append(1) or model_init(self, *a)
    )
    lower = [140, *capacity[1:]]
    rounds = [
        ((capacity, {}), {}),
        ((capacity, {0: {0}}), {}),
        ((lower, {0: {0}}), {}),
        ((lower, {0: {0}}), {"kernel_columns": True}),
        ((lower, {0: {0}}), {"kernel_columns": True, "first_processor_room": True}),
    ]
    search = SOLVE.Search(problem)
    for args, options in rounds:
        answer = search.solve(*args, **options)
        fresh = SOLVE.solve(problem, *args, **options)
        assert answer.optimal and fresh.optimal
        assert objective(problem, answer) == objective(problem, fresh), (args, options)
    assert len(built) == 1 + len(rounds)  # the search's one, and one per fresh model
