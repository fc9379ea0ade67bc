"""Where training runs: the PyTorch device (CPU, CUDA GPU, Apple MPS), mixed precision and
torch.compile.

`edgesynth train --device` keeps the vendor's meaning (the MAX chip: `--device MAX78000`) and
also takes a PyTorch device (`auto`, `cpu`, `cuda`, `cuda:N`, `mps`); the two sets of names
do not overlap, so `split_device` tells them apart. `--chip` names the MAX chip explicitly.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from dataclasses import dataclass

import torch

from edgesynth.errors import EdgesynthError

TORCH_DEVICES = "auto, cpu, cuda, cuda:N, mps"
_TORCH_DEVICE = re.compile(r"^(auto|cpu|mps|cuda(:\d+)?)$")


def is_torch_device(text: str) -> bool:
    return bool(_TORCH_DEVICE.match(text.strip().lower()))


def split_device(device: str | None, chip: str | None) -> tuple[str, str]:
    """(MAX chip name, PyTorch device spec) from `--device` and `--chip`.

    `--device MAX78002` (the vendor's spelling) names the chip; `--device cuda` the PyTorch
    device. Naming the chip twice, differently, is refused.
    """
    from edgesynth.targets.max7800x.device import get_device

    spec = "auto"
    chip_name = get_device(chip).name if chip else None
    if device:
        if is_torch_device(device):
            spec = device.strip().lower()
        else:
            try:
                named = get_device(device).name
            except EdgesynthError:
                raise EdgesynthError(
                    f"`{device}` is neither a PyTorch device ({TORCH_DEVICES}) nor a MAX chip "
                    "(MAX78000, MAX78002).",
                    key="--device",
                ) from None
            if chip_name and named != chip_name:
                raise EdgesynthError(
                    f"{named}, but --chip {chip_name}: two different chips.",
                    key="--device",
                )
            chip_name = named
    return chip_name or "MAX78000", spec


def resolve(spec: str, local_rank: int | None = None) -> torch.device:
    """The PyTorch device for `spec`; `auto` picks CUDA, then MPS, then the CPU.

    In a distributed run on GPUs each process takes the GPU of its local rank.
    """
    spec = spec.strip().lower()
    if not is_torch_device(spec):
        raise EdgesynthError(
            f"`{spec}` is not a PyTorch device; choose one of {TORCH_DEVICES}.", key="--device"
        )
    if spec == "auto":
        if torch.cuda.is_available():
            spec = "cuda"
        elif _mps_available():
            spec = "mps"
        else:
            spec = "cpu"
    if spec.startswith("cuda"):
        if not torch.cuda.is_available():
            build = "built without CUDA" if torch.version.cuda is None else "no GPU visible"
            raise EdgesynthError(
                f"{spec}: PyTorch sees no CUDA GPU here (torch {torch.__version__}, "
                f"{build}); use --device cpu or auto.",
                key="--device",
            )
        count = torch.cuda.device_count()
        index = int(spec.split(":")[1]) if ":" in spec else (local_rank or 0)
        if index >= count:
            raise EdgesynthError(
                f"{spec}: this machine has {count} CUDA GPU(s), numbered 0 to {count - 1}.",
                key="--device",
            )
        return torch.device("cuda", index)
    if spec == "mps" and not _mps_available():
        raise EdgesynthError(
            "mps: Apple's Metal backend is not available here; use --device cpu or auto.",
            key="--device",
        )
    return torch.device(spec)


def _mps_available() -> bool:
    backend = getattr(torch.backends, "mps", None)
    return bool(backend is not None and backend.is_available())


def describe(device: torch.device) -> str:
    """`cuda:0 (NVIDIA A100)`, `mps`, `cpu (2 threads)`: the line printed at the start."""
    if device.type == "cuda":
        return f"{device} ({torch.cuda.get_device_name(device)})"
    if device.type == "cpu":
        return f"cpu ({torch.get_num_threads()} threads)"
    return str(device)


@dataclass(frozen=True)
class Precision:
    """Mixed precision for the float phase: autocast's dtype and whether gradients are scaled.

    QAT and the 8-bit evaluation never run under autocast: their rounding must be exact.
    """

    device_type: str
    enabled: bool

    @property
    def dtype(self) -> torch.dtype:
        # float16 needs gradient scaling, which only CUDA's scaler is proven for; bfloat16
        # keeps float32's range on the CPU and on Apple GPUs.
        return torch.float16 if self.device_type == "cuda" else torch.bfloat16

    def scaler(self) -> torch.amp.GradScaler:
        return torch.amp.GradScaler("cuda", enabled=self.enabled and self.device_type == "cuda")

    @contextlib.contextmanager
    def autocast(self, active: bool) -> Iterator[None]:
        if not (self.enabled and active):
            yield
            return
        with torch.autocast(self.device_type, dtype=self.dtype):
            yield


def compile_default(device: torch.device, requested: bool | None) -> bool:
    """torch.compile: on by default where CUDA runs the training (as the vendor's training)."""
    return device.type == "cuda" if requested is None else requested


def compile_qat(requested: bool | None) -> bool:
    """The QAT epochs are compiled only where --compile asks: on an H100 with PyTorch
    2.11+cu130, inductor's recompiled QAT graph of ai85netextrasmall failed at its first step
    (a stride assertion in convolution_backward's weight gradient; the float epochs and the
    same run uncompiled were fine; docs/training.md). The float epochs keep the default."""
    return bool(requested)
