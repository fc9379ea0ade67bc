"""Training throughput: images per second of `edgesynth train`'s own epoch loop, as a table.

For the MNIST model (ai85net5, 1x28x28) and the CIFAR-10 model (ai85nascifarnet, 3x32x32),
on every PyTorch device this machine has (the CPU, CUDA GPUs, Apple's MPS), in the float phase
and in quantization-aware training: random images of the right shape go through
`edgesynth.train.loop.train_epoch` (data loader, forward, loss, backward, optimizer step),
after one warm-up epoch. Per row:

- `1 proc`: images/s of one process (all the CPU threads torch uses);
- `N procs`: images/s of N data-parallel processes (`--nproc`, default 2; Gloo on the CPU,
  the processes share the cores: cores/N threads each), the way `edgesynth train
  --nproc-per-node N` runs, counted over all processes' shares;
- `loader`: images/s of the data loader alone (no model), which must stay far above the
  training rate (data loading is never the bottleneck);
- `qat/float`: a QAT epoch's time over a float epoch's (one process).

    python benchmarks/train_throughput.py [--images 2048] [--batch-size 64] [--nproc 2]
        [--amp] [--compile] [--device cpu]
"""

from __future__ import annotations

import argparse
import os
import socket
import time

import torch
import torch.distributed as tdist
import torch.multiprocessing as mp

from edgesynth.nn.qat import QatPolicy, enable_qat
from edgesynth.train import accel, distributed
from edgesynth.train.datasets import Dataset, Split
from edgesynth.train.loop import TrainConfig, build_model, loader, make_optimizer, train_epoch

MODELS = (("ai85net5", (1, 28, 28)), ("ai85nascifarnet", (3, 32, 32)))


def devices() -> list[str]:
    found = ["cpu"]
    if torch.cuda.is_available():
        found.append("cuda")
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        found.append("mps")
    return found


def random_dataset(shape: tuple[int, ...], images: int) -> Dataset:
    gen = torch.Generator().manual_seed(0)
    x = torch.randint(-128, 128, (images, *shape), generator=gen).float() / 128
    y = torch.randint(0, 10, (images,), generator=gen)
    split = Split(x, y)
    return Dataset("random", split, split, 10, [str(i) for i in range(10)])


def measure(
    model_name: str,
    shape: tuple[int, ...],
    device: str,
    phase: str,
    args,
    ctx: distributed.Context = distributed.SINGLE,
) -> float:
    """Images per second of one timed epoch (over every process's share when `ctx` is a
    data-parallel run: the slowest process sets the time)."""
    cfg = TrainConfig(
        model=model_name,
        dataset=random_dataset(shape, args.images),
        batch_size=args.batch_size,
        augment=False,
        progress=False,
        seed=1,
        torch_device=accel.resolve(device),
        amp=args.amp,
        compile=args.compile,
        workers=args.workers,
        dist=ctx,
    )
    model = build_model(cfg)
    if phase == "qat":
        enable_qat(model, QatPolicy(start_epoch=0, weight_bits=8))
    model = model.to(cfg.torch_device)
    if len(shape) == 3:
        model = model.to(memory_format=torch.channels_last)
    step_model = distributed.wrap(model, ctx, cfg.torch_device)
    step_model = torch.compile(step_model) if cfg.compile else step_model
    optimizer = make_optimizer(cfg, model, 1e-3)
    scaler = accel.Precision(cfg.torch_device.type, cfg.amp).scaler()

    def epoch() -> None:
        train_epoch(
            step_model,
            cfg.dataset.train,
            optimizer,
            cfg,
            None,
            phase,
            10,
            qat=phase == "qat",
            scaler=scaler,
        )
        if cfg.torch_device.type == "cuda":
            torch.cuda.synchronize()

    epoch()  # warm-up (and compilation)
    distributed.barrier(ctx)
    start = time.perf_counter()
    epoch()
    distributed.barrier(ctx)
    return args.images / (time.perf_counter() - start)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _rank(rank: int, world: int, port: int, job: tuple, results) -> None:  # type: ignore[no-untyped-def]
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(max(1, (os.cpu_count() or 1) // world))
    tdist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        rate = measure(*job, ctx=distributed.Context(rank, world, rank))
        if rank == 0:
            results.put(rate)
    finally:
        tdist.destroy_process_group()


def measure_parallel(model_name, shape, device, phase, args) -> float:  # type: ignore[no-untyped-def]
    """Images per second of `args.nproc` data-parallel CPU processes (Gloo)."""
    results = mp.get_context("spawn").SimpleQueue()
    job = (model_name, shape, device, phase, args)
    mp.spawn(_rank, (args.nproc, _free_port(), job, results), nprocs=args.nproc)
    return results.get()


def measure_loader(shape: tuple[int, ...], args) -> float:
    """Images per second of the training data loader alone (no model)."""
    split = random_dataset(shape, args.images).train
    batches = loader(split, args.batch_size, shuffle=True, seed=1, workers=args.workers)
    for _ in batches:  # warm-up
        pass
    start = time.perf_counter()
    count = sum(len(y) for _, y in batches)
    return count / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=2048, help="images per timed epoch")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--threads", type=int, default=None, help="CPU threads for torch")
    parser.add_argument("--workers", type=int, default=0, help="data-loader workers")
    parser.add_argument("--nproc", type=int, default=2, help="data-parallel CPU processes")
    parser.add_argument("--amp", action="store_true", help="mixed precision (float phase)")
    parser.add_argument("--compile", action="store_true", help="torch.compile the model")
    parser.add_argument("--device", action="append", help="only these devices (repeatable)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} CPU threads, "
        f"{os.cpu_count()} cores, {args.images} images per epoch, batch {args.batch_size}"
    )
    head = f"{'device':7} {'model':16} {'phase':6} {'1 proc':>8} {f'{args.nproc} procs':>8}"
    print(f"{head} {'loader':>9} {'qat/float':>9}   (images/s)")
    for device in args.device or devices():
        for name, shape in MODELS:
            load = measure_loader(shape, args)
            single = {phase: measure(name, shape, device, phase, args) for phase in PHASES}
            for phase in PHASES:
                parallel = (
                    f"{measure_parallel(name, shape, device, phase, args):8.0f}"
                    if device == "cpu" and args.nproc > 1
                    else f"{'-':>8}"
                )
                ratio = single["float"] / single["qat"] if phase == "qat" else 1.0
                print(
                    f"{device:7} {name:16} {phase:6} {single[phase]:8.0f} {parallel} "
                    f"{load:9.0f} {ratio:9.2f}"
                )


PHASES = ("float", "qat")


if __name__ == "__main__":
    main()
