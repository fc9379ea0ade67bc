"""The interface every target implements (the registry that finds them: `registry.py`).

A target is a package (a folder `targets/<name>/`, or a separately installed one) that defines
`Target` subclasses and registers them, with its sub-commands, through the entry-point group
`edgesynth.targets` (see `edgesynth.targets.registry`). Adding a target adds a folder and its
entry point; nothing else changes. The target's module must import quickly: heavy dependencies
are imported inside methods.

The flow, for `edgesynth compile MODEL --target NAME -o OUT/`:

    graph (from a front end)  --lower-->  Program (the target's hardware layers, quantized)
    Program --check--> every violated rule       (raises MultipleErrors)
    Program --plan-->  placement                 (stored in the program's typed `plan`)
    Program --simulate--> every layer's output   (bit-exact)
    Program --emit--> files in OUT/ + compiled.json (the manifest `edgesynth run` reads)
    OUT/ --load--> the loaded program            (what the files say, read back)
    loaded --run--> the outputs of the emitted files on the target's executor

Each step runs once, in this order, on the previous step's result, and calls no other step.
Each target defines its own `Program` subclass (its layers, its plan, its options, typed) and
the type `load` returns; `Target[ProgramT, LoadedT]` names both.

`Program.graph` is the integer graph the hardware computes, so `sim.graph.run(program.graph, x)`
and `target.simulate(program, x)` must agree value for value, and `run(load(emit(program)), x)`
must agree with both; tests/test_target_contract.py proves it for every registered target.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

import numpy as np

from edgesynth.errors import EdgesynthError, did_you_mean
from edgesynth.ir.graph import Graph, QType
from edgesynth.ir.intrange import int_range
from edgesynth.proof import Proof

if TYPE_CHECKING:
    from edgesynth.ir.fusion import Pattern, TreePattern
    from edgesynth.ir.numformat import NumberFormat

# the registry (the targets are found through entry points), re-exported
from edgesynth.targets.registry import load_object, target_references
from edgesynth.targets.registry import target_names as target_names

if TYPE_CHECKING:
    from edgesynth.targets.report_model import TargetReport

MANIFEST = "compiled.json"


@dataclass
class TensorFormat:
    """How a float tensor becomes the integers a program takes or returns: q = round(x / scale)."""

    name: str
    shape: tuple[int, ...]
    bits: int
    signed: bool
    scale: float | None

    @classmethod
    def of(cls, name: str, shape: tuple[int, ...], qtype: QType) -> TensorFormat:
        return cls(name, tuple(shape), qtype.bits, qtype.signed, qtype.scale)

    def quantize(self, x: np.ndarray) -> np.ndarray:
        """Float input -> integers (round half up, saturate), as the host side does."""
        if self.scale is None:
            raise EdgesynthError(f"input `{self.name}` has no known scale: pass integer data")
        lo, hi = int_range(self.bits, self.signed)
        q = np.floor(np.asarray(x, dtype=np.float64) / self.scale + 0.5)
        return np.clip(q, lo, hi).astype(np.int64)

    def dequantize(self, q: np.ndarray) -> np.ndarray:
        return q.astype(np.float64) * (1.0 if self.scale is None else self.scale)

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "shape": list(self.shape),
            "bits": self.bits,
            "signed": self.signed,
            "scale": self.scale,
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> TensorFormat:
        return cls(d["name"], tuple(d["shape"]), d["bits"], d["signed"], d["scale"])


@dataclass
class HostDense:
    """A fully-connected layer the host computes in float on the dequantized outputs."""

    weight: np.ndarray  # (out, in)
    bias: np.ndarray  # (out,)
    relu: bool = False


HOST_LAYERS_FILE = "host_layers.npz"


def save_host_layers(layers: list[HostDense], folder: Path) -> str:
    """Write the host's layers beside the compiled files; returns the file name."""
    arrays: dict[str, np.ndarray] = {"relu": np.array([lay.relu for lay in layers], dtype=bool)}
    for i, lay in enumerate(layers):
        arrays[f"weight{i}"] = np.asarray(lay.weight, dtype=np.float64)
        arrays[f"bias{i}"] = np.asarray(lay.bias, dtype=np.float64)
    with open(Path(folder) / HOST_LAYERS_FILE, "wb") as f:
        np.savez(f, **arrays)
    return HOST_LAYERS_FILE


def load_host_layers(folder: Path, manifest: dict[str, Any]) -> list[HostDense]:
    name = manifest.get("host_layers")
    if not name:
        return []
    path = Path(folder) / str(name)
    try:
        with np.load(path, allow_pickle=False) as data:
            relu = [bool(r) for r in data["relu"]]
            return [HostDense(data[f"weight{i}"], data[f"bias{i}"], r) for i, r in enumerate(relu)]
    except (OSError, KeyError, ValueError) as err:
        raise EdgesynthError(f"cannot read the host's layers ({err}).", file=str(path)) from None


@dataclass(kw_only=True)
class Program:
    """What every target's program has: the graph it computes and what the host sees of it.
    Each target subclasses it with its hardware layers, its plan and its options, typed."""

    target: str
    graph: Graph  # the integer graph the hardware computes (bit-exact semantics)
    inputs: list[TensorFormat]
    outputs: list[TensorFormat]
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what `compile` prints about the program
    # What the host computes on the dequantized outputs: fully-connected layers (float),
    # then "softmax", "logsoftmax" or None.
    host_post: str | None = None
    host_layers: list[HostDense] = field(default_factory=list)
    proof: Proof | None = None  # set when the emitted files were proven (`Target.prove`)

    def postprocess(self, values: np.ndarray) -> np.ndarray:
        """The host's part after the chip: `host_layers`, then `host_post`, on dequantized
        outputs (N, ...)."""
        if self.host_layers:
            values = values.reshape(len(values), -1).astype(np.float64)
            for lay in self.host_layers:
                values = values @ lay.weight.T + lay.bias
                if lay.relu:
                    values = np.maximum(values, 0.0)
        if self.host_post is None:
            return values
        from edgesynth.ir.graph import Softmax
        from edgesynth.sim.graph import evaluate

        node = Softmax(name="host", inputs=["y"], outputs=["p"], log=self.host_post == "logsoftmax")
        flat = values.reshape(len(values), -1)
        return evaluate(node, flat).reshape(values.shape)


ProgramT = TypeVar("ProgramT", bound=Program)
LoadedT = TypeVar("LoadedT", bound=Program)
PlanT = TypeVar("PlanT")


def planned(program: Program, plan: PlanT | None) -> PlanT:
    """`plan`, the program's plan: a step after `plan` refuses a program not yet planned
    (steps never run one another)."""
    if plan is None:
        raise EdgesynthError(
            f"this {program.target} program of {program.graph.name} is not planned: run "
            "Target.plan (or Target.compile) before simulating or emitting it"
        )
    return plan


def require_finite(
    array: np.ndarray, what: str, *, file: str | None = None, key: str | None = None
) -> None:
    """Refuse data that is not numbers, or holds NaN or infinite values (every target)."""
    array = np.asarray(array)
    if array.dtype.kind not in "biuf":
        raise EdgesynthError(f"{what} must hold numbers, not {array.dtype}.", file=file, key=key)
    if array.dtype.kind == "f" and not np.isfinite(array).all():
        bad = np.argwhere(~np.isfinite(array))[0]
        at = ", ".join(map(str, bad))
        raise EdgesynthError(
            f"{what} holds {int((~np.isfinite(array)).sum())} NaN or infinite values "
            f"(the first at index [{at}]: {array[tuple(bad)]}); give finite numbers.",
            file=file,
            key=key,
        )


@dataclass(frozen=True)
class TargetSummary:
    """What `edgesynth compile -t all` tabulates of one compiled program (`Target.summarize`):
    its multiply-accumulates, the memory its weights and activations take against the chip's
    capacity, and the target's own latency estimate. None where the target does not know."""

    macs: int | None = None  # multiply-accumulates per inference on the accelerator
    weight_bytes: int | None = None
    weight_capacity: int | None = None  # bytes of the memory the weights live in
    weight_memory: str | None = None  # that memory's name ("kernel memory", "L3")
    activation_bytes: int | None = None
    activation_capacity: int | None = None
    activation_memory: str | None = None
    cycles: int | None = None  # the target's latency estimate
    clock_hz: int | None = None  # the nominal clock the estimate counts

    @property
    def seconds(self) -> float | None:
        if self.cycles is None or not self.clock_hz:
            return None
        return self.cycles / self.clock_hz

    def to_json(self) -> dict[str, Any]:
        return {
            "macs": self.macs,
            "weights": _memory_json(self.weight_bytes, self.weight_capacity, self.weight_memory),
            "activations": _memory_json(
                self.activation_bytes, self.activation_capacity, self.activation_memory
            ),
            "cycles": self.cycles,
            "clock_hz": self.clock_hz,
            "seconds": self.seconds,
        }


def _memory_json(used: int | None, capacity: int | None, memory: str | None) -> dict[str, Any]:
    return {"bytes": used, "capacity": capacity, "memory": memory}


def graph_macs(graph: Graph) -> int:
    """Multiply-accumulates of one inference of `graph`: every convolution's and fully-connected
    layer's output values times the products each sums."""
    from edgesynth.ir.graph import Conv, Linear

    total = 0
    for node in graph.nodes:
        if isinstance(node, Conv | Linear):
            outputs = int(np.prod(graph.tensors[node.output].shape))
            total += outputs * int(np.prod(node.weight.shape[1:]))
    return total


@dataclass
class CompileOptions:
    calibration: np.ndarray | None = None  # float inputs for post-training quantization
    options: dict[str, Any] = field(default_factory=dict)  # target-specific, by name


class Target(ABC, Generic[ProgramT, LoadedT]):
    """One accelerator. Subclasses set `name` and `summary` and implement the seven steps on
    their own program type (`ProgramT`, what `lower` makes) and loaded type (`LoadedT`, what
    `load` reads back from emitted files)."""

    name: ClassVar[str]
    summary: ClassVar[str]
    option_keys: ClassVar[tuple[str, ...]] = ()  # what `compile --option KEY=VALUE` takes
    # The graphs `lower` takes: "float" (quantized with calibration data), "integer" (already
    # quantized, as the integer front ends write them); any other graph it refuses.
    graph_kinds: ClassVar[tuple[str, ...]] = ("float", "integer")
    # takes `compile --sample-input`'s array as its `sample` option (the input whose known
    # answer its files check); for the others the file only goes to the model reader
    takes_sample: ClassVar[bool] = False
    # quantizes a float model into a RequantShift ONNX network it can write
    # (`compile --export-integer-onnx`)
    exports_integer_onnx: ClassVar[bool] = False
    # the `compile` flags it takes (`--cpu-only` -> "cpu_only"), given to `lower` as options
    compile_flags: ClassVar[tuple[str, ...]] = ()

    def check_option_keys(self, keys: Iterable[str]) -> None:
        """Refuse a `--option` key the target does not take, naming the ones it takes."""
        for key in keys:
            if key not in self.option_keys:
                takes = (
                    f"its options are {', '.join(self.option_keys)}"
                    if self.option_keys
                    else "it takes none"
                )
                raise EdgesynthError(
                    f"{self.name} has no option `{key}`; {takes}."
                    + did_you_mean(key, self.option_keys),
                    key="--option",
                )

    def number_format(self) -> NumberFormat:
        """The numbers post-training quantization makes for this target, as its device
        description declares them (`ir.numformat`)."""
        raise NotImplementedError(f"target {self.name} declares no number format")

    def fusion_patterns(self) -> tuple[Pattern, ...]:
        """The operator chains one hardware layer runs, as its lowering lists them
        (`ir.fusion`)."""
        raise NotImplementedError(f"target {self.name} lists no fusion patterns")

    def read_patterns(self) -> tuple[TreePattern, ...]:
        """What one hardware layer reads before its operation, backward from the operation's
        input, as its lowering lists them (`ir.fusion` trees); none where it lists none."""
        return ()

    @abstractmethod
    def lower(self, graph: Graph, options: CompileOptions) -> ProgramT:
        """Quantize (a float graph, with calibration data) and fuse into hardware layers."""

    @abstractmethod
    def check(self, program: ProgramT) -> None:
        """Raise `MultipleErrors` naming every violated rule in the network's terms."""

    @abstractmethod
    def plan(self, program: ProgramT) -> None:
        """Place the checked program (memories, processors, addresses); store it in
        `program.plan`."""

    @abstractmethod
    def simulate(self, program: ProgramT, inputs: list[np.ndarray]) -> list[np.ndarray]:
        """The planned program's bit-exact outputs for integer input batches (one array per
        input)."""

    @abstractmethod
    def emit(self, program: ProgramT, folder: Path) -> list[str]:
        """Write the planned program's files and the manifest (`write_manifest`) into `folder`
        (a staging folder); return their names."""

    @abstractmethod
    def load(self, folder: Path, manifest: dict[str, Any]) -> LoadedT:
        """Read an emitted program back from `folder` (what `run` executes, `edgesynth run`)."""

    @abstractmethod
    def run(self, loaded: LoadedT, inputs: list[np.ndarray]) -> list[np.ndarray]:
        """The loaded program's outputs for integer input batches, from the target's executor
        of its emitted files; equal to `simulate` of the program that was emitted."""

    # -- the proof (optional) -------------------------------------------------------------
    executor: ClassVar[str | None] = None  # what `prove` runs the emitted files on

    def prove(self, program: ProgramT, folder: Path, inputs: list[np.ndarray]) -> Proof | None:
        """Run the files `emit` wrote in `folder` on `executor` for `inputs` (one batch per
        input) and compare with the bit-exact simulator: the Proof, or ProofFailed. None for a
        target without an executor."""
        return None

    def expected(self, program: Program, inputs: list[np.ndarray]) -> np.ndarray:
        """The reference the proof compares with: the program's integer graph, simulated (each
        tensor dropped after its last use: a large network's are tens of MB)."""
        from edgesynth.sim.graph import run

        feed = dict(zip(program.graph.inputs, inputs, strict=True))
        values = run(program.graph, feed, keep=False)
        out = values[program.graph.outputs[0]]
        return out.reshape(len(out), *program.outputs[0].shape)

    # -- the summary (`compile -t all`) ---------------------------------------------------
    def summarize(self, program: ProgramT) -> TargetSummary:
        """The planned program's MACs, memory and latency estimate; a target adds what its plan
        knows (this default: the MACs of the program's graph only)."""
        return TargetSummary(macs=graph_macs(program.graph))

    # -- the report (`edgesynth report`) -------------------------------------------------
    def report_data(self, folder: Path, manifest: dict[str, Any]) -> TargetReport:
        """What `edgesynth report` shows of `folder`, which this target's compile wrote (its
        `manifest`): the layers, memory pictures and latency, read from the files there."""
        raise EdgesynthError(
            f"the target {self.name} gives no report of its folders", file=str(folder)
        )

    # -- shared ---------------------------------------------------------------------------
    def compile(self, graph: Graph, options: CompileOptions) -> ProgramT:
        if options.calibration is not None:
            require_finite(options.calibration, "calibration data", key="--calibration")
        program = self.lower(graph, options)
        self.check(program)
        self.plan(program)
        return program

    def write_manifest(self, program: Program, folder: Path, files: list[str]) -> list[str]:
        """Write `compiled.json` (what `edgesynth run` reads) beside `files`; returns every name."""
        extra = [save_host_layers(program.host_layers, folder)] if program.host_layers else []
        names = sorted({*files, *extra, MANIFEST})
        manifest = self.manifest(program, [n for n in names if n != MANIFEST])
        (Path(folder) / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")
        return names

    def manifest(self, program: Program, files: list[str]) -> dict[str, Any]:
        """The manifest's content; targets add their own fields by overriding this."""
        return {
            "format": "edgesynth-compiled/1",
            "target": self.name,
            "network": program.graph.name,
            "inputs": [t.to_json() for t in program.inputs],
            "outputs": [t.to_json() for t in program.outputs],
            "files": sorted(files),
            "warnings": program.warnings,
            "host_post": program.host_post,
            "host_layers": HOST_LAYERS_FILE if program.host_layers else None,
        }


# -- registry (targets/registry.py reads the entry points) ---------------------------------

AnyTarget = Target[Any, Any]


def target_class(name: str) -> type[AnyTarget]:
    """The `Target` subclass registered as `name` (case-insensitive; see registry.py); an
    unknown name is refused naming the known ones."""
    refs = target_references()
    key = name.lower()
    if key not in refs:
        names = sorted(refs)
        raise EdgesynthError(
            f"unknown target `{name}`; the targets are {', '.join(names)}."
            + did_you_mean(key, names),
            key="--target",
        )
    cls = load_object(refs[key], f"the target `{key}`")
    if not (isinstance(cls, type) and issubclass(cls, Target)):
        raise EdgesynthError(f"the target `{key}` (`{refs[key]}`) is not a Target subclass")
    if cls.name != key:
        raise EdgesynthError(
            f"the target registered as `{key}` (`{refs[key]}`) calls itself `{cls.name}`"
        )
    return cls


def get_target(name: str) -> AnyTarget:
    """A registered target by name, ready to use."""
    return target_class(name)()


def read_manifest(folder: Path) -> dict[str, Any]:
    if not Path(folder).is_dir():
        what = "a file" if Path(folder).exists() else "not there"
        raise EdgesynthError(
            f"{folder} is {what}; give the folder `edgesynth compile` (or a target's compile "
            "command) wrote"
        )
    path = Path(folder) / MANIFEST
    try:
        manifest = json.loads(path.read_text())
    except FileNotFoundError:
        raise EdgesynthError(
            f"{folder} is not a compiled program (no {MANIFEST}); make one with "
            "`edgesynth compile MODEL --target NAME -o DIR`"
        ) from None
    except (OSError, ValueError) as err:
        raise EdgesynthError(f"cannot read {path}: {err}") from None
    if manifest.get("format") != "edgesynth-compiled/1":
        raise EdgesynthError(f"{path}: not an edgesynth manifest (format edgesynth-compiled/1)")
    return manifest
