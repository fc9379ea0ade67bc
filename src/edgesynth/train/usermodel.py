"""The user's own network class (`--model-file FILE.py:CLASS`, `--model-args`).

The class is an `edgesynth.nn` network: a torch `nn.Module` whose layers are edgesynth.nn
layers. It is built with the keyword arguments its constructor takes of `num_classes`,
`num_channels`, `dimensions` and `bias` (the built-in models' arguments), plus `--model-args`.
What goes wrong is one message naming the file, the line and the layer:
- a constructor argument that cannot be given or is missing (the signature),
- a layer the chip does not have (a torch.nn layer outside edgesynth.nn, or an edgesynth.nn
  layer with settings the chip cannot run),
- a tensor of the wrong shape in the forward pass (`probe`),
- an exception of the user's own code (with that code's traceback, marked as such).
"""

from __future__ import annotations

import inspect
import json
import re
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

import edgesynth.nn as enn
from edgesynth.errors import EdgesynthError
from edgesynth.nn.base import HardwareLayer
from edgesynth.nn.eltwise import Eltwise
from edgesynth.train.userfile import (
    UserRef,
    definition_line,
    describe_user_failure,
    lookup,
    parse_ref,
    user_frames,
)

STANDARD_ARGS = ("num_classes", "num_channels", "dimensions", "bias")
# torch.nn modules a network may hold besides edgesynth.nn layers: they compute nothing the
# chip has to (containers), or nothing at inference (dropout)
_HARMLESS = (
    nn.Sequential,
    nn.ModuleList,
    nn.ModuleDict,
    nn.Identity,
    nn.Flatten,
    nn.Dropout,
    nn.Dropout1d,
    nn.Dropout2d,
)


@dataclass(frozen=True)
class UserModel:
    ref: UserRef
    args: dict[str, Any] = field(default_factory=dict)

    @property
    def name(self) -> str:
        """The checkpoints' `arch`: the class name."""
        return self.ref.name

    def build(
        self,
        *,
        num_classes: int,
        num_channels: int,
        dimensions: tuple[int, ...],
        bias: bool | None = None,
        device: str = "MAX78000",
    ) -> nn.Module:
        cls = model_class(self.ref)
        given = {"num_classes": num_classes, "num_channels": num_channels}
        given["dimensions"] = tuple(dimensions)
        if bias is not None:
            given["bias"] = bias
        kwargs = constructor_args(cls, self.ref, given, self.args)
        with enn.use(device):
            try:
                net = cls(**kwargs)
            except EdgesynthError as err:  # an edgesynth.nn layer the chip cannot run
                raise _at_user_line(err, self.ref.path) from None
            except Exception as err:
                raise describe_user_failure(err, self.ref.path, f"{cls.__name__}(...)") from None
        if not isinstance(net, nn.Module):
            raise EdgesynthError(
                f"{cls.__name__}(...) returned {type(net).__name__}, not a torch nn.Module.",
                file=str(self.ref.path),
                line=definition_line(cls),
            )
        check_layers(net, cls, self.ref.path)
        return net


def user_model(spec: str | None, args: str | dict[str, Any] | None) -> UserModel | None:
    """`--model-file` and `--model-args` -> UserModel (None without `--model-file`)."""
    if spec is None:
        if args:
            raise EdgesynthError("--model-args needs --model-file.", key="--model-args")
        return None
    return UserModel(parse_ref(spec, "--model-file"), parse_model_args(args))


def parse_model_args(args: str | dict[str, Any] | None) -> dict[str, Any]:
    """`--model-args`: a JSON object, or a YAML file holding a mapping."""
    if args is None or isinstance(args, dict):
        return dict(args or {})
    text, source = args, None
    if args.endswith((".yaml", ".yml", ".json")) or Path(args).is_file():
        source = args
        try:
            text = Path(args).read_text()
        except OSError as err:
            raise EdgesynthError(f"cannot read it ({err.strerror}).", file=args) from None
    try:
        if source is not None and not source.endswith(".json"):
            import yaml

            value = yaml.safe_load(text)
        else:
            value = json.loads(text)
    except ValueError as err:  # json and yaml errors are both ValueErrors
        where = f" ({err})".splitlines()[0]
        raise EdgesynthError(
            f"not a JSON object or YAML mapping{where}.", file=source, key="--model-args"
        ) from None
    if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
        raise EdgesynthError(
            f"expected a mapping of argument names to values, got {type(value).__name__}.",
            file=source,
            key="--model-args",
        )
    return value


def model_class(ref: UserRef) -> type[nn.Module]:
    cls = lookup(ref, "network class")
    if not (isinstance(cls, type) and issubclass(cls, nn.Module)):
        raise EdgesynthError(
            f"`{ref.name}` is a {type(cls).__name__}, not a network class (a subclass of "
            "torch.nn.Module built from edgesynth.nn layers).",
            file=str(ref.path),
            line=definition_line(cls),
            key=ref.option,
        )
    return cls


def constructor_args(
    cls: type, ref: UserRef, given: dict[str, Any], extra: dict[str, Any]
) -> dict[str, Any]:
    """The keyword arguments for `cls(...)`: those of `given` it takes, and all of `extra`."""
    params = inspect.signature(cls).parameters
    takes_any = any(p.kind is p.VAR_KEYWORD for p in params.values())
    named = [n for n, p in params.items() if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    where = {"file": str(ref.path), "line": definition_line(cls)}
    unknown = [k for k in extra if k not in named and not takes_any]
    if unknown:
        raise EdgesynthError(
            f"{cls.__name__}(...) takes no argument `{unknown[0]}` (from --model-args); it "
            f"takes {', '.join(named) or 'none'}.",
            **where,
        )
    kwargs = {k: v for k, v in given.items() if k in named or takes_any}
    kwargs.update(extra)
    missing = [
        n
        for n, p in params.items()
        if p.default is p.empty
        and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
        and n not in kwargs
    ]
    if missing:
        raise EdgesynthError(
            f"{cls.__name__}(...) needs `{missing[0]}`, which edgesynth does not give (it "
            f"gives {', '.join(STANDARD_ARGS)}); give it a default or pass it with "
            f"--model-args '{{\"{missing[0]}\": ...}}'.",
            **where,
        )
    return kwargs


def _at_user_line(err: EdgesynthError, path: Path) -> EdgesynthError:
    """An edgesynth.nn refusal raised while the user's constructor ran, at the user's line."""
    frames = user_frames(err.__traceback__, path)
    if not frames:
        return err
    f = frames[-1]
    return EdgesynthError(f"{f.line}: {err.render()}", file=str(path), line=f.lineno)


def check_layers(net: nn.Module, cls: type, path: Path) -> None:
    """Every computing module is an edgesynth.nn layer (the chip has nothing else)."""
    for name, module in net.named_modules():
        if not name or isinstance(module, (HardwareLayer, Eltwise, *_HARMLESS)):
            continue
        if _inside_hardware_layer(net, name):
            continue
        own = [n for n, _ in module.named_parameters(recurse=False)]
        from_torch = type(module).__module__.startswith("torch.")
        if from_torch or own:
            what = f"torch.nn.{type(module).__name__}" if from_torch else type(module).__name__
            raise EdgesynthError(
                f"layer `{name}` is a {what}, which the chip does not have; build the network "
                "from edgesynth.nn layers (Conv1d, Conv2d, ConvTranspose2d, Linear, the Fused* "
                "layers with pooling, batchnorm and ReLU/Abs, MaxPool/AvgPool, Add/Sub/Or/Xor).",
                file=str(path),
                line=attribute_line(cls, name.split(".")[0]),
            )


def _inside_hardware_layer(net: nn.Module, name: str) -> bool:
    parts = name.split(".")
    for i in range(1, len(parts)):
        if isinstance(net.get_submodule(".".join(parts[:i])), HardwareLayer):
            return True
    return False


def attribute_line(cls: type, attribute: str) -> int | None:
    """The line of `self.<attribute> = ...` in `cls` (or a base class in the same file)."""
    pattern = re.compile(rf"\bself\.{re.escape(attribute)}\s*[:=]")
    for klass in cls.__mro__:
        try:
            lines, start = inspect.getsourcelines(klass)
        except (OSError, TypeError):
            continue
        for i, text in enumerate(lines):
            if pattern.search(text):
                return start + i
    return definition_line(cls)


@contextmanager
def _running_layers(net: nn.Module) -> Any:
    """Keep the names of the modules whose forward pass is running (innermost last)."""
    stack: list[str] = []
    handles = []

    def leave(module: nn.Module, args: Any, output: Any) -> None:
        stack.pop()  # returns None: the layer's output stays as it is

    for name, module in net.named_modules():
        if not name:
            continue
        handles.append(module.register_forward_pre_hook(lambda m, a, n=name: stack.append(n)))
        handles.append(module.register_forward_hook(leave))
    try:
        yield stack
    finally:
        for h in handles:
            h.remove()


def probe(net: nn.Module, model: UserModel, x: torch.Tensor, data: str) -> None:
    """One batch through the user's network: a failure names the file, the line and the
    layer that was running (a wrong tensor shape), or shows the user's failing code."""
    path = model.ref.path
    with _running_layers(net) as stack, torch.no_grad():
        try:
            net(x)
        except EdgesynthError:
            raise
        except Exception as err:
            frames = user_frames(err.__traceback__, path)
            inside_layer = bool(stack) and not _raised_in(err, path)
            if not inside_layer:
                raise describe_user_failure(err, path, f"{model.name}.forward") from None
            layer = stack[-1]
            kind = type(net.get_submodule(layer)).__name__
            detail = str(err).splitlines()[0]
            shape = "x".join(map(str, x.shape[1:]))
            raise EdgesynthError(
                f"layer `{layer}` ({kind}) fails on {data} ({shape} input): {detail}.",
                file=str(path),
                line=frames[-1].lineno if frames else attribute_line(type(net), layer),
            ) from None


def _raised_in(err: BaseException, path: Path) -> bool:
    """Whether the exception was raised by a line of the user's file itself."""
    tb = err.__traceback__
    last = None
    while tb is not None:
        last = tb
        tb = tb.tb_next
    return last is not None and Path(last.tb_frame.f_code.co_filename).resolve() == path.resolve()
