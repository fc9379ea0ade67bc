"""Data-parallel training through PyTorch's own distributed engine.

`edgesynth train --nproc-per-node N` starts N copies of the training with torch's elastic
launcher (the engine behind `torchrun`): NCCL between GPUs, Gloo between CPU processes.
Each copy reads the rank variables torchrun sets (`RANK`, `WORLD_SIZE`, `LOCAL_RANK`), so
`torchrun -m edgesynth train ...` works as well. The model is wrapped in
DistributedDataParallel; each process sees its share of every epoch (a DistributedSampler);
only rank 0 prints, evaluates and writes files.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import sys
import uuid
from dataclasses import dataclass

import torch
import torch.distributed as tdist
from torch import nn

from edgesynth.errors import EdgesynthError


@dataclass(frozen=True)
class Context:
    """This process's place in the run; one process (rank 0 of 1) when not distributed."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    @property
    def active(self) -> bool:
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0


SINGLE = Context()


def from_env() -> Context:
    """The context torchrun's variables describe (SINGLE outside a distributed launch)."""
    env = os.environ
    if "WORLD_SIZE" not in env or "RANK" not in env:
        return SINGLE
    try:
        return Context(
            rank=int(env["RANK"]),
            world_size=int(env["WORLD_SIZE"]),
            local_rank=int(env.get("LOCAL_RANK", "0")),
        )
    except ValueError:
        raise EdgesynthError(
            "RANK, WORLD_SIZE and LOCAL_RANK must be integers (as torchrun sets them)."
        ) from None


def start(ctx: Context, device: torch.device) -> None:
    """Join the process group: NCCL when each process drives a GPU, Gloo otherwise."""
    if not ctx.active or tdist.is_initialized():
        return
    backend = "nccl" if device.type == "cuda" else "gloo"
    if device.type == "cuda":
        torch.cuda.set_device(device)
    tdist.init_process_group(backend=backend)
    # The launcher stops the other processes when one fails; a process told to stop ends
    # like Ctrl-C, so a run folder without a checkpoint is removed again.
    signal.signal(signal.SIGTERM, _interrupt)


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def lost_contact(err: BaseException) -> bool:
    """True for the error a collective raises when another process of the run is gone."""
    text = str(err).lower()
    return isinstance(err, tdist.DistError) or "gloo" in text or "nccl" in text


def stop(ctx: Context) -> None:
    if ctx.active and tdist.is_initialized():
        tdist.destroy_process_group()


def barrier(ctx: Context) -> None:
    if ctx.active:
        tdist.barrier()


def sum_over_ranks(ctx: Context, values: list[float], device: torch.device) -> list[float]:
    """Element-wise sums of `values` over all processes (the values themselves alone)."""
    if not ctx.active:
        return values
    t = torch.tensor(values, dtype=torch.float64, device=device)
    tdist.all_reduce(t, op=tdist.ReduceOp.SUM)
    return [float(v) for v in t.cpu()]


def shared_seed(ctx: Context, seed: int | None) -> int | None:
    """The data-order seed every process uses: `seed`, or one rank 0 draws."""
    if not ctx.active:
        return seed
    box = [seed if seed is not None else int(torch.randint(0, 2**31 - 1, (1,)))]
    tdist.broadcast_object_list(box, src=0)
    return int(box[0])


def wrap(model: nn.Module, ctx: Context, device: torch.device) -> nn.Module:
    """DistributedDataParallel around `model` (which it copies from rank 0 to every rank)."""
    if not ctx.active:
        return model
    import warnings

    from torch.nn.parallel import DistributedDataParallel

    # A one-channel convolution's weight is the same tensor in both memory formats, yet its
    # channels-last strides differ on the size-1 axis, which DDP warns about; harmless.
    warnings.filterwarnings("ignore", message="Grad strides do not match bucket view strides")
    ids = [device.index] if device.type == "cuda" else None
    return DistributedDataParallel(model, device_ids=ids)


# --- the launcher ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Launch:
    nproc_per_node: int
    nnodes: int = 1
    node_rank: int = 0
    master_addr: str = "127.0.0.1"
    master_port: int | None = None

    def check(self) -> None:
        if self.nproc_per_node < 1:
            raise EdgesynthError("must be at least 1.", key="--nproc-per-node")
        if self.nnodes < 1:
            raise EdgesynthError("must be at least 1.", key="--nnodes")
        if not 0 <= self.node_rank < self.nnodes:
            raise EdgesynthError(
                f"must be between 0 and {self.nnodes - 1} (--nnodes {self.nnodes}), got "
                f"{self.node_rank}.",
                key="--node-rank",
            )
        if self.nnodes > 1 and self.master_port is None:
            raise EdgesynthError(
                "a run on several nodes needs --master-addr and --master-port (the same on "
                "every node).",
                key="--master-port",
            )


def in_launched_process() -> bool:
    """True inside a process torchrun (or `--nproc-per-node`) started."""
    return "TORCHELASTIC_RUN_ID" in os.environ or "LOCAL_RANK" in os.environ


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def launch(spec: Launch, worker_args: list[str], threads: int | None) -> None:
    """Run `python -m edgesynth.train.worker *worker_args` in nproc_per_node processes on this
    node under torch's elastic agent; return when all finished, or raise EdgesynthError
    naming the first process that failed (the agent stops the others)."""
    from torch.distributed.elastic.multiprocessing import DefaultLogsSpecs
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.launcher.api import LaunchConfig, elastic_launch

    spec.check()
    # The launcher's own progress messages are torch internals; failures are reported below.
    for name in ("torch.distributed.elastic", "torch.distributed.launcher"):
        logging.getLogger(name).setLevel(logging.CRITICAL)
    per_process = threads or max(1, (os.cpu_count() or 1) // spec.nproc_per_node)
    os.environ.setdefault("OMP_NUM_THREADS", str(per_process))
    port = spec.master_port if spec.master_port is not None else _free_port()
    config = LaunchConfig(
        min_nodes=spec.nnodes,
        max_nodes=spec.nnodes,
        nproc_per_node=spec.nproc_per_node,
        run_id=f"edgesynth-{uuid.uuid4().hex[:8]}" if spec.nnodes == 1 else "edgesynth",
        rdzv_backend="static",
        rdzv_endpoint=f"{spec.master_addr}:{port}",
        rdzv_configs={"rank": spec.node_rank},
        max_restarts=0,
        monitor_interval=0.5,
        start_method="spawn",
        logs_specs=DefaultLogsSpecs(),
    )
    try:
        elastic_launch(config, entrypoint=sys.executable)(
            "-u", "-m", "edgesynth.train.worker", *worker_args
        )
    except ChildFailedError as err:
        raise EdgesynthError(_failure_line(err, spec)) from None


def _failure_line(err: object, spec: Launch) -> str:
    failures = getattr(err, "failures", {}) or {}
    if not failures:
        return "a training process failed; the others were stopped."
    # A process killed by a signal is the cause; one that exited because it lost contact with
    # it is the consequence, even when the launcher saw it first.
    rank, failure = min(
        failures.items(),
        key=lambda item: (
            int(getattr(item[1], "exitcode", 1)) >= 0,
            getattr(item[1], "timestamp", 0),
        ),
    )
    code = int(getattr(failure, "exitcode", 1))
    how = f"was killed by signal {_signal_name(-code)}" if code < 0 else f"exited with {code}"
    where = f"rank {rank}" + (f" on node {spec.node_rank}" if spec.nnodes > 1 else "")
    others = spec.nproc_per_node * spec.nnodes - 1
    return (
        f"training process {where} {how}; the other {others} process(es) were stopped "
        "and the run ended (its finished checkpoints are kept)."
    )


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return str(number)
