"""The targets edgesynth knows, found through the entry-point group `edgesynth.targets`.

A target package (edgesynth's own four, or a separately installed one) declares in its
pyproject.toml

    [project.entry-points."edgesynth.targets"]
    gati = "edgesynth.targets.gati.plugin:PLUGIN"

naming a `TargetPlugin`: its targets (name -> "module:Class", a `Target` subclass), the
function that adds its sub-commands to `edgesynth`, the model readers it adds to
`edgesynth compile` (a file suffix -> "module:function"), and the top-level commands among
them that read their own command line (`raw_commands`, run without building the others).
Everything is named by string, so listing the targets or building `edgesynth --help` imports
no target module; a target's class is imported when it is used.

The API (stable): `target_names()` (every registered target's name, sorted; also in
`targets.base`), `target_references()` (name -> "module:Class"), `plugins()` (entry-point name ->
TargetPlugin), `model_reader(PATH)`; `targets.base.get_target(NAME)` and `target_class(NAME)`
import the class (this module names classes only, so it imports no target).
"""

from __future__ import annotations

import functools
import importlib
import os
from collections.abc import Callable, Mapping
from dataclasses import field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from edgesynth.errors import EdgesynthError
from edgesynth.lean_dataclass import dataclass

if TYPE_CHECKING:
    from edgesynth.entry_points import EntryPoint

GROUP = "edgesynth.targets"


@dataclass(frozen=True)
class ModelReader:
    """A model file type a target package reads into the network graph."""

    suffixes: tuple[str, ...]  # lower case, with the dot: (".yaml", ".yml")
    function: str  # "module:function", called as function(path: Path, request: ModelRequest)
    kind: str  # what the files are, for messages: "the vendor's network description"


@dataclass(frozen=True)
class TargetPlugin:
    """What a target package registers under the entry-point group `edgesynth.targets`."""

    targets: Mapping[str, str]  # target name -> "module:Class"
    commands: str | None = None  # "module:function" called with `edgesynth`'s sub-parsers
    model_readers: tuple[ModelReader, ...] = ()
    # Top-level commands that read their own command line (`commands` registers them with
    # `raw_handler`): name -> "module:function", called with every argument after the name.
    # `edgesynth NAME ...` runs it without building the other commands' parsers. It calls
    # `edgesynth.collector.start()` once its modules are loaded.
    raw_commands: Mapping[str, str] = field(default_factory=dict)


def load_object(reference: str, what: str) -> Any:
    """`module:attribute` (or `module`) imported; a failure is one message naming `what`."""
    module, _, attribute = reference.partition(":")
    try:
        obj: Any = importlib.import_module(module.strip())
        for part in filter(None, attribute.strip().split(".")):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as err:
        if isinstance(err, ModuleNotFoundError) and err.name and not module.startswith(err.name):
            raise  # a library the module needs (the missing-extra message names it)
        raise EdgesynthError(f"{what} `{reference}` cannot be loaded: {err}") from None
    return obj


@functools.cache
def plugins() -> dict[str, TargetPlugin]:
    """Every registered target package, by entry-point name (sorted); {} when none is."""
    from edgesynth.entry_points import entry_points

    found: dict[str, TargetPlugin] = {}
    by: dict[str, str] = {}
    entries = entry_points(GROUP)
    if not any(e.distribution == "edgesynth" for e in entries):
        entries += _source_tree_entries()
    for entry in sorted(entries, key=lambda e: e.name):
        if entry.name in found:
            raise EdgesynthError(
                f"two distributions register the target package `{entry.name}` "
                f"(`{GROUP}` entry points): {by[entry.name]} and {entry.distribution}; "
                "uninstall one"
            )
        what = f"the `{GROUP}` entry point `{entry.name}` of {entry.distribution}"
        plugin = load_object(entry.value, what)
        if not isinstance(plugin, TargetPlugin):
            raise EdgesynthError(
                f"{what} (`{entry.value}`) is a {type(plugin).__name__}, not a TargetPlugin "
                "(edgesynth.targets.registry.TargetPlugin)"
            )
        found[entry.name], by[entry.name] = plugin, entry.distribution
    return found


def _source_tree_entries() -> list[EntryPoint]:
    """edgesynth's own target packages (each `targets/NAME/plugin.py` declaring `PLUGIN`),
    for a run from a source tree that has no installed metadata (`PYTHONPATH=src`): the
    same entry points its pyproject.toml declares, found in the folder instead."""
    from edgesynth.entry_points import EntryPoint

    here = os.path.dirname(__file__)
    with os.scandir(here) as folders:
        names = sorted(f.name for f in folders if f.is_dir())
    return [
        EntryPoint(name, f"edgesynth.targets.{name}.plugin:PLUGIN", "edgesynth (source tree)")
        for name in names
        if os.path.isfile(os.path.join(here, name, "plugin.py"))
    ]


@functools.cache
def target_references() -> dict[str, str]:
    """Target name -> "module:Class"; a name two packages claim is refused."""
    refs: dict[str, str] = {}
    owner: dict[str, str] = {}
    for package, plugin in plugins().items():
        for name, ref in plugin.targets.items():
            if name in refs:
                raise EdgesynthError(
                    f"two target packages register the target `{name}`: `{owner[name]}` "
                    f"({refs[name]}) and `{package}` ({ref}); uninstall one"
                )
            refs[name], owner[name] = ref, package
    if not refs:
        raise EdgesynthError(
            f"no targets are registered: the `{GROUP}` entry points are missing from the "
            "installed package metadata (edgesynth not installed, or installed before its "
            "targets became entry points); install it: `pip install -e .` in a checkout, or "
            "`pip install edgesynth`"
        )
    return refs


def target_names() -> list[str]:
    """Every registered target's name, sorted (what `edgesynth targets` lists)."""
    return sorted(target_references())


def model_readers() -> dict[str, tuple[ModelReader, str]]:
    """Suffix -> (the reader, the package registering it)."""
    readers: dict[str, tuple[ModelReader, str]] = {}
    for package, plugin in plugins().items():
        for reader in plugin.model_readers:
            for suffix in reader.suffixes:
                readers.setdefault(suffix.lower(), (reader, package))
    return readers


def model_reader(path: Path) -> Callable[..., Any] | None:
    """The registered reader of `path`'s file type (its last suffix), or None."""
    entry = model_readers().get(path.suffix.lower())
    if entry is None:
        return None
    reader, package = entry
    function: Callable[..., Any] = load_object(
        reader.function, f"the model reader of target package `{package}`"
    )
    return function


def model_kinds() -> str:
    """The model files edgesynth reads, for messages and help texts: ONNX, then each
    registered reader's."""
    from edgesynth.frontends import MODEL_KINDS

    kinds = [MODEL_KINDS]
    for plugin in plugins().values():
        kinds += [f"{r.suffixes[0]} ({r.kind})" for r in plugin.model_readers]
    return ", ".join(kinds)


def command_modules() -> list[str]:
    """The modules that add the target packages' sub-commands (imported by `--help`)."""
    return [p.commands.partition(":")[0] for p in plugins().values() if p.commands]
