"""The accelerator's arithmetic, one operator per function, on int64 NumPy arrays.

Data is channels-first: (C, H, W) for 2D, (C, L) for 1D. Weights are (out, in/groups, kh, kw)
or (out, in/groups, k). Accumulators are exact integers. Convolutions run as float32 or float64
matrix products (BLAS), whichever holds every partial sum exactly (float32 below 2**24; float64
below 2**53: 8-bit data x 8-bit weights x at most 1024 x 9 terms, plus bias x 128).
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from edgesynth.sim.rounding import divide, shift_requantize

Pair = tuple[int, int]

ACC_EXACT_LIMIT = 2**52
FLOAT32_EXACT_LIMIT = 2**24  # every integer below it is a float32


def _exact_matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a @ b: exact for integer arrays (via BLAS when the result cannot lose precision), float64
    for float arrays."""
    if not (np.issubdtype(a.dtype, np.integer) and np.issubdtype(b.dtype, np.integer)):
        return np.matmul(a.astype(np.float64), b.astype(np.float64))
    bound = float(np.abs(a).max(initial=0)) * float(np.abs(b).max(initial=0)) * a.shape[-1]
    if bound < ACC_EXACT_LIMIT:
        return np.matmul(a.astype(np.float64), b.astype(np.float64)).astype(np.int64)
    return np.matmul(a.astype(np.int64), b.astype(np.int64))


def _integers(a: np.ndarray, b: np.ndarray) -> bool:
    return np.issubdtype(a.dtype, np.integer) and np.issubdtype(b.dtype, np.integer)


def _matmul_type(data: np.ndarray, kernels: np.ndarray) -> type:
    """The type `conv2d_batch` computes in: float64 (BLAS) for floats; for integers, the
    smallest of float32 and float64 that holds every sum exactly (bounded from the data, a
    superset of the im2col columns, so the data are converted before they are copied into
    columns; half the memory of float64 where 8-bit layers fit), int64 beyond that.

    Every partial sum of output o, in whatever order BLAS adds, is at most the largest |data|
    times o's sum of |weights| (`sum_bound`); the coarser max|data| x max|weight| x the kernel
    size, cheaper to make, settles most layers first."""
    if not _integers(data, kernels):
        return np.float64
    coarse = float(_magnitude(data)) * float(_magnitude(kernels)) * kernels.shape[-1]
    if coarse < FLOAT32_EXACT_LIMIT:
        return np.float32
    largest = sum_bound(data, kernels)
    if largest < FLOAT32_EXACT_LIMIT:
        return np.float32
    return np.float64 if largest < ACC_EXACT_LIMIT else np.int64


def sum_bound(data: np.ndarray, kernels: np.ndarray) -> float:
    """The largest |partial sum| any output of integer `data` convolved with `kernels` (the
    last axis: one output's weights) can reach: the largest |data| times the largest sum of
    one output's |weights|."""
    weight_sum = int(np.abs(kernels, dtype=np.int64).sum(axis=-1).max(initial=0))
    return float(_magnitude(data)) * float(weight_sum)


def _magnitude(a: np.ndarray) -> int:
    """The largest |value| of an integer array, exactly (no temporary, no overflow)."""
    return max(-int(a.min()), int(a.max())) if a.size else 0


_CHUNK_ELEMENTS = 1 << 25  # im2col elements per batch chunk (256 MiB of float64)


def conv2d_batch(
    data: np.ndarray,
    weight: np.ndarray,
    bias: np.ndarray | None = None,
    *,
    stride: Pair = (1, 1),
    pads: tuple[int, int, int, int] = (0, 0, 0, 0),
    dilation: Pair = (1, 1),
    groups: int = 1,
    keep_float: bool = False,
) -> np.ndarray:
    """2D cross-correlation of a batch (N, C, H, W) -> (N, O, Ho, Wo) with zero padding
    `pads` = (top, left, bottom, right). Exact for integers; float64 for floats.

    `bias` is added to the result as given (callers scale it). `keep_float`: integer sums in
    the float type they were computed in (exact in it), not converted to int64.
    """
    batch, channels = data.shape[:2]
    out_channels, in_per_group, kh, kw = weight.shape
    if in_per_group * groups != channels:
        raise ValueError(f"weights expect {in_per_group * groups} channels, data has {channels}")
    kernels = weight.reshape(groups, out_channels // groups, in_per_group * kh * kw)
    work = _matmul_type(data, kernels)
    padded = _zero_padded(data, pads, work)
    kernels = kernels.astype(work, copy=False)
    span_h = dilation[0] * (kh - 1) + 1
    span_w = dilation[1] * (kw - 1) + 1
    windows = sliding_window_view(padded, (span_h, span_w), axis=(2, 3))
    windows = windows[:, :, :: stride[0], :: stride[1], :: dilation[0], :: dilation[1]]
    out_h, out_w = windows.shape[2], windows.shape[3]
    per_sample = max(channels * kh * kw * out_h * out_w, 1)
    step = max(1, _CHUNK_ELEMENTS // per_sample)
    parts = []
    for start in range(0, batch, step):
        chunk = windows[start : start + step]
        n = chunk.shape[0]
        # (n, C, Ho, Wo, kh, kw) -> (groups, Cg*kh*kw, n*Ho*Wo)
        cols = chunk.reshape(n, groups, in_per_group, out_h, out_w, kh, kw)
        cols = cols.transpose(1, 2, 5, 6, 0, 3, 4).reshape(groups, in_per_group * kh * kw, -1)
        out = np.matmul(kernels, cols).reshape(out_channels, n, out_h, out_w)
        parts.append(out.transpose(1, 0, 2, 3))
    out = np.concatenate(parts) if len(parts) > 1 else parts[0]
    if work != np.int64 and _integers(data, weight) and not keep_float:
        out = out.astype(np.int64)
    if bias is not None:
        b = np.asarray(bias)[None, :, None, None]
        if np.result_type(out, b) == out.dtype:
            out += b  # `out` is this function's own array: the same sums, in place
        else:
            out = out + b
    return out


def conv2d_blocks(
    data: np.ndarray,
    weight: np.ndarray,
    *,
    stride: Pair = (1, 1),
    pad: Pair = (0, 0),
    scale: float = 1.0,
    offset: np.ndarray | None = None,
    block: int = 1 << 18,
) -> Iterator[tuple[int, np.ndarray]]:
    """`conv2d` of (C, H, W) integer data (one group, no dilation, no bias) in blocks of whole
    output rows, each of about `block` sums and im2col values at most (one row at least):
    yields (first row, (O, rows, Wo) sums) in the type `conv2d_batch` computes in
    (`keep_float`), so that a caller's work on each block stays in cache and no whole-layer
    sums are kept. The blocks reuse their buffers: a block's sums are valid until the next is
    asked for.

    With `scale` or `offset` (one integer per output) the blocks hold (sums + offset) x
    scale: for a float type only, and exact where `scale` is a power of two and every
    partial sum, the offset included, an integer below the type's exact limit (the caller's
    bound). Many channels at stride 1 are summed one kernel tap at a time (`_tap_blocks`),
    others through im2col columns (`_column_blocks`)."""
    out_channels, channels, kh, kw = weight.shape
    if channels != data.shape[0]:
        raise ValueError(f"weights expect {channels} channels, data has {data.shape[0]}")
    kernels = weight.reshape(out_channels, channels * kh * kw)
    work = _matmul_type(data, kernels)
    if (offset is not None or scale != 1.0) and work == np.int64:
        raise ValueError("a scale or offset needs sums in a float type")
    kernels = kernels.astype(work, copy=False) * work(scale)
    added = None if offset is None else np.reshape(offset, (-1, 1)).astype(work) * work(scale)
    if stride == (1, 1) and kh * kw > 1 and channels >= _TAP_CHANNELS:
        return _tap_blocks(data, kernels.reshape(weight.shape), pad, added, block)
    padded = _zero_padded(data[None], (pad[0], pad[1], pad[0], pad[1]), work)[0]
    if added is not None:  # one more tap, on a row of ones
        kernels = np.concatenate([kernels, added], axis=1)
    windows = sliding_window_view(padded, (kh, kw), axis=(1, 2))[:, :: stride[0], :: stride[1]]
    return _column_blocks(windows, kernels, block)


_TAP_CHANNELS = 32  # channels from which a tap's product is big enough to beat im2col's copies


def _column_blocks(
    windows: np.ndarray, kernels: np.ndarray, block: int
) -> Iterator[tuple[int, np.ndarray]]:
    """`conv2d_blocks` through im2col columns: (C, Ho, Wo, kh, kw) windows, (O, taps [+ 1])
    kernels (a last column: the offset, on a row of ones)."""
    channels, out_h, out_w, kh, kw = windows.shape
    out_channels, width = kernels.shape
    taps = channels * kh * kw
    rows = max(1, min(out_h, block // max(1, max(out_channels, taps) * out_w)))
    cols_buffer = np.empty(width * rows * out_w, dtype=kernels.dtype)
    sums_buffer = np.empty(out_channels * rows * out_w, dtype=kernels.dtype)
    for first in range(0, out_h, rows):
        part = windows[:, first : first + rows]  # (C, rows, Wo, kh, kw)
        n = part.shape[1] * out_w
        # -> (C*kh*kw, rows*Wo), the order of the kernels' taps (then the row of ones)
        cols = cols_buffer[: width * n]
        np.copyto(
            cols[: taps * n].reshape(channels, kh, kw, -1, out_w), part.transpose(0, 3, 4, 1, 2)
        )
        cols[taps * n :] = 1
        sums = sums_buffer[: out_channels * n].reshape(out_channels, n)
        np.matmul(kernels, cols.reshape(width, n), out=sums)
        yield first, sums.reshape(out_channels, -1, out_w)


def _tap_blocks(
    data: np.ndarray, kernels: np.ndarray, pad: Pair, added: np.ndarray | None, block: int
) -> Iterator[tuple[int, np.ndarray]]:
    """`conv2d_blocks` at stride 1 one kernel tap at a time, without im2col: the padded data
    rows laid end to end, output pixel (r, c) of tap (i, j) reads flat position (r + i) x Wp +
    c + j, so a block of rows is one strided (C, rows x Wp) view per tap, which BLAS reads as
    it is; the sums of each tap's (O, C) kernels times that view add up (the last kw - 1
    columns of each row are not outputs and are left out). Scaled (O, C, kh, kw) kernels;
    `added`: (O, 1) scaled offsets."""
    out_channels, channels, kh, kw = kernels.shape
    work = kernels.dtype
    top, left = pad
    height, width = data.shape[1] + 2 * top, data.shape[2] + 2 * left
    padded = np.zeros((channels, height + 1, width), dtype=work)  # (a row more: see below)
    padded[:, top : top + data.shape[1], left : left + data.shape[2]] = data
    flat = padded.reshape(channels, -1)
    out_h, out_w = height - kh + 1, width - kw + 1
    taps = [
        (np.ascontiguousarray(kernels[:, :, i, j]), i * width + j)
        for i in range(kh)
        for j in range(kw)
    ]
    rows = max(1, min(out_h, block // max(1, max(out_channels, channels) * width)))
    sums_buffer = np.empty(out_channels * rows * width, dtype=work)
    part_buffer = np.empty_like(sums_buffer)
    for first in range(0, out_h, rows):
        n = min(rows, out_h - first) * width  # (the last tap's view ends within the extra row)
        sums = sums_buffer[: out_channels * n].reshape(out_channels, n)
        part = part_buffer[: out_channels * n].reshape(out_channels, n)
        for t, (tap, shift) in enumerate(taps):
            view = flat[:, first * width + shift : first * width + shift + n]
            np.matmul(tap, view, out=part if t else sums)
            if t:
                sums += part
        if added is not None:
            sums += added
        yield first, sums.reshape(out_channels, -1, width)[:, :, :out_w]


def _zero_padded(data: np.ndarray, pads: tuple[int, int, int, int], dtype: type) -> np.ndarray:
    """`data` (N, C, H, W) as `dtype` with `pads` = (top, left, bottom, right) zero rows and
    columns around it: one copy (none where nothing is padded and the type is already right)."""
    top, left, bottom, right = pads
    if not any(pads):
        return data.astype(dtype, copy=False)
    n, c, h, w = data.shape
    out = np.zeros((n, c, h + top + bottom, w + left + right), dtype)
    out[:, :, top : top + h, left : left + w] = data
    return out


def conv2d(
    data: np.ndarray,
    weight: np.ndarray,
    bias: np.ndarray | None = None,
    *,
    stride: Pair = (1, 1),
    pad: Pair = (0, 0),
    dilation: Pair = (1, 1),
    groups: int = 1,
    pad_after: Pair = (0, 0),
    keep_float: bool = False,
) -> np.ndarray:
    """Exact integer 2D cross-correlation with zero padding: (C, H, W) -> (O, Ho, Wo).

    `bias` is added to the accumulator as given (callers scale it). `pad_after` adds extra
    zero rows/columns at the bottom/right only (used by transposed convolution). `keep_float`:
    as `conv2d_batch`.
    """
    pads = (pad[0], pad[1], pad[0] + pad_after[0], pad[1] + pad_after[1])
    return conv2d_batch(
        data[None],
        weight,
        bias,
        stride=stride,
        pads=pads,
        dilation=dilation,
        groups=groups,
        keep_float=keep_float,
    )[0]


def conv1d(
    data: np.ndarray,
    weight: np.ndarray,
    bias: np.ndarray | None = None,
    *,
    stride: int = 1,
    pad: int = 0,
    dilation: int = 1,
    groups: int = 1,
) -> np.ndarray:
    """Exact integer 1D cross-correlation: (C, L) -> (O, Lo)."""
    out = conv2d(
        data[:, :, None],
        weight[:, :, :, None],
        bias,
        stride=(stride, 1),
        pad=(pad, 0),
        dilation=(dilation, 1),
        groups=groups,
    )
    return out[:, :, 0]


def conv_transpose2d(
    data: np.ndarray,
    weight: np.ndarray,
    bias: np.ndarray | None = None,
    *,
    stride: Pair = (2, 2),
    pad: Pair = (1, 1),
    output_padding: Pair = (1, 1),
    dilation: Pair = (1, 1),
    groups: int = 1,
) -> np.ndarray:
    """Transposed convolution as the hardware runs it: zero-stuff by the stride, then a plain
    convolution padded by dilation*(k-1)-pad (plus output padding at the bottom/right).

    `weight` is already in convolution form (out, in/groups, kh, kw): channels swapped and the
    kernel flipped, as the network builder prepares it.
    """
    channels, height, width = data.shape
    stuffed = np.zeros(
        (channels, (height - 1) * stride[0] + 1, (width - 1) * stride[1] + 1), dtype=np.int64
    )
    stuffed[:, :: stride[0], :: stride[1]] = data
    kh, kw = weight.shape[2:]
    return conv2d(
        stuffed,
        weight,
        bias,
        pad=(dilation[0] * (kh - 1) - pad[0], dilation[1] * (kw - 1) - pad[1]),
        dilation=dilation,
        groups=groups,
        pad_after=output_padding,
    )


def pooled_size(size: int, pool: int, stride: int, dilation: int = 1) -> int:
    """Output length of in-flight pooling along one axis (no padding)."""
    return (size + stride - pool - dilation + 1) // stride


def _pool_windows(data: np.ndarray, pool: Pair, stride: Pair, dilation: Pair) -> np.ndarray:
    """(C, Ho, Wo, ph, pw) pooling windows of (C, H, W) data (a view of it where the windows
    stay inside: no copy of a large layer's data).

    The vendor's output size, (size + stride - pool - dilation + 1) // stride, lets a dilated
    window of 3 or more reach past the last row or column. Its NumPy view then reads on in
    memory: past the last column into the next row, past the last row into the next channel.
    That is reproduced for C-ordered data; past the end of the data it reads zeros (the vendor
    reads whatever follows the array).
    """
    channels, height, width = data.shape
    out_h = pooled_size(height, pool[0], stride[0], dilation[0])
    out_w = pooled_size(width, pool[1], stride[1], dilation[1])
    span_h = dilation[0] * (pool[0] - 1) + 1
    span_w = dilation[1] * (pool[1] - 1) + 1
    if (out_h - 1) * stride[0] + span_h <= height and (out_w - 1) * stride[1] + span_w <= width:
        windows = sliding_window_view(data, (span_h, span_w), axis=(1, 2))
        windows = windows[:, : out_h * stride[0] : stride[0], : out_w * stride[1] : stride[1]]
        return windows[..., :: dilation[0], :: dilation[1]]
    rows = (np.arange(out_h) * stride[0])[:, None] + np.arange(pool[0]) * dilation[0]
    cols = (np.arange(out_w) * stride[1])[:, None] + np.arange(pool[1]) * dilation[1]
    index = (
        (np.arange(channels) * height * width)[:, None, None, None, None]
        + (rows * width)[None, :, None, :, None]
        + cols[None, None, :, None, :]
    )
    flat = np.concatenate([data.reshape(-1), np.zeros(int(index.max()) + 1, dtype=data.dtype)])
    return flat[index].reshape(channels, out_h, out_w, *pool)


def average(sums: np.ndarray, count: int | np.ndarray, rounding: bool) -> np.ndarray:
    """Average of 8-bit values: truncated toward zero, or rounded half away from zero."""
    return divide(sums, count, "half_away" if rounding else "trunc")


def _pool_inside(data: np.ndarray, pool: Pair, stride: Pair, dilation: Pair) -> Pair | None:
    """(pooled rows, pooled columns) where every window stays inside the data; else None
    (`_pool_windows` reproduces the vendor's overrun)."""
    _, height, width = data.shape
    out_h = pooled_size(height, pool[0], stride[0], dilation[0])
    out_w = pooled_size(width, pool[1], stride[1], dilation[1])
    last_h = (out_h - 1) * stride[0] + dilation[0] * (pool[0] - 1)
    last_w = (out_w - 1) * stride[1] + dilation[1] * (pool[1] - 1)
    if out_h <= 0 or out_w <= 0 or last_h >= height or last_w >= width:
        return None
    return out_h, out_w


def _pool_separable(
    data: np.ndarray, pool: Pair, stride: Pair, dilation: Pair, size: Pair, average_pool: bool
) -> np.ndarray:
    """Max, or the sum, over every window of `size` (C, Ho, Wo) positions inside the data:
    over the window's rows first (whole-layer operations on strided rows, contiguous along
    them), then over its columns (the maximum and the integer sum separate exactly); several
    times faster than one operation per window position, and than a reduction over the small
    window axes of a window view."""
    rows = [data[:, i * dilation[0] :: stride[0]][:, : size[0]] for i in range(pool[0])]
    part = _combine(rows, average_pool)  # (C, Ho, W)
    cols = [part[:, :, j * dilation[1] :: stride[1]][:, :, : size[1]] for j in range(pool[1])]
    return _combine(cols, average_pool)


def _combine(taps: list[np.ndarray], average_pool: bool) -> np.ndarray:
    """The element-wise maximum, or the sum (in the type NumPy's sum gives), of the arrays."""
    if average_pool:
        total = np.array(taps[0], dtype=_sum_type(taps[0]))
        for tap in taps[1:]:
            np.add(total, tap, out=total)
        return total
    result = taps[0].copy()
    for tap in taps[1:]:
        np.maximum(result, tap, out=result)
    return result


def _sum_type(data: np.ndarray) -> np.dtype:
    """The dtype NumPy's sum gives `data` (small integers widen to the platform integer)."""
    return np.zeros(1, dtype=data.dtype).sum().dtype


def pool2d(
    data: np.ndarray,
    pool: Pair,
    stride: Pair,
    *,
    average_pool: bool,
    dilation: Pair = (1, 1),
    rounding: bool = False,
) -> np.ndarray:
    """In-flight max or average pooling of (C, H, W) data. Pool size 1 only subsamples.

    `rounding` rounds averages half away from zero, as the newest vendor sources do (older
    ones used np.round, half to even); without it averages are truncated toward zero.
    """
    if pool == (1, 1):
        return data[:, :: stride[0], :: stride[1]]
    size = _pool_inside(data, pool, stride, dilation)
    if size is not None:
        pooled = _pool_separable(data, pool, stride, dilation, size, average_pool)
        return average(pooled, pool[0] * pool[1], rounding) if average_pool else pooled
    windows = _pool_windows(data, pool, stride, dilation)
    if average_pool:
        return average(windows.sum(axis=(-2, -1)), pool[0] * pool[1], rounding)
    return windows.max(axis=(-2, -1))


def eltwise(operation: str, operands: list[np.ndarray]) -> np.ndarray:
    """Left-to-right element-wise add/sub/xor/or of equally shaped operands (wide result)."""
    result = operands[0].astype(np.int64)
    for other in operands[1:]:
        if operation == "add":
            result = result + other
        elif operation == "sub":
            result = result - other
        elif operation == "xor":
            result = np.bitwise_xor(result, other)
        elif operation == "or":
            result = np.bitwise_or(result, other)
        else:
            raise ValueError(f"unknown element-wise operation {operation!r}")
    return result


def clip8(data: np.ndarray) -> np.ndarray:
    return np.clip(data, -128, 127)


def requantize(acc: np.ndarray, shift: int) -> np.ndarray:
    """8-bit output: clip(floor(acc * 2**shift / 128 + 1/2)), i.e. round half toward +inf."""
    return shift_requantize(acc, shift - 7)


def activate(data: np.ndarray, activation: str | None, *, inplace: bool = False) -> np.ndarray:
    """ReLU clips to [0, 127]; Abs takes |x| clipped to 127 (also on 32-bit outputs); None
    passes the data unchanged. Anything else is a bug upstream (the YAML loader refuses it).
    `inplace`: into `data` itself (a caller's own array: no copy of a large layer)."""
    out = data if inplace else None
    if activation == "relu":
        return np.clip(data, 0, 127, out=out)
    if activation == "abs":
        return np.minimum(np.abs(data, out=out), 127, out=out)
    if activation is None:
        return data
    raise ValueError(f"unknown activation `{activation}`; the hardware has relu, abs or none")


def tree_average(values: list[np.ndarray]) -> np.ndarray:
    """Gati's pairwise-average tree: averages of consecutive pairs (an odd last input passes as
    is) enter a FIFO; the two oldest entries are averaged and the result re-queued until one value
    is left. Each average is (a + b) >> 1 (floor)."""
    fifo = [(values[k] + values[k + 1]) >> 1 for k in range(0, len(values) - 1, 2)]
    if len(values) % 2:
        fifo.append(values[-1])
    head = 0
    while len(fifo) - head > 1:
        fifo.append((fifo[head] + fifo[head + 1]) >> 1)
        head += 2
    return fifo[head]


def pool_windows_batch(
    data: np.ndarray,
    kernel: Pair,
    stride: Pair,
    *,
    dilation: Pair = (1, 1),
    pads: tuple[int, int, int, int] = (0, 0, 0, 0),
    ceil: bool = False,
    fill: int | float = 0,
) -> tuple[np.ndarray, np.ndarray]:
    """Pooling windows of a batch (N, C, H, W): (N, C, Ho, Wo, kh*kw) and a (Ho, Wo, kh*kw) mask
    of the positions inside the explicit padding or the data (False: past the end in ceil mode).

    Explicit pads and ceil-mode overhang read `fill`.
    """
    padded, (out_h, out_w), (span_h, span_w) = _pool_padded(
        data, kernel, stride, dilation, pads, ceil, fill
    )
    _, _, height, width = data.shape
    top, left, bottom, right = pads
    windows = sliding_window_view(padded, (span_h, span_w), axis=(2, 3))
    windows = windows[:, :, : out_h * stride[0] : stride[0], : out_w * stride[1] : stride[1]]
    windows = windows[..., :: dilation[0], :: dilation[1]]
    windows = windows.reshape(*windows.shape[:4], -1)
    rows = np.arange(out_h)[:, None] * stride[0] + np.arange(kernel[0]) * dilation[0]
    cols = np.arange(out_w)[:, None] * stride[1] + np.arange(kernel[1]) * dilation[1]
    inside_h = rows < height + top + bottom
    inside_w = cols < width + left + right
    mask = (inside_h[:, None, :, None] & inside_w[None, :, None, :]).reshape(out_h, out_w, -1)
    return windows, mask


def _pool_padded(
    data: np.ndarray,
    kernel: Pair,
    stride: Pair,
    dilation: Pair,
    pads: tuple[int, int, int, int],
    ceil: bool,
    fill: int | float,
) -> tuple[np.ndarray, Pair, Pair]:
    """The batch padded with `fill` (explicit pads and ceil-mode overhang), the output size and
    the window's span."""
    _, _, height, width = data.shape
    top, left, bottom, right = pads
    span_h = dilation[0] * (kernel[0] - 1) + 1
    span_w = dilation[1] * (kernel[1] - 1) + 1

    def out_size(size: int, lo: int, hi: int, span: int, step: int) -> int:
        room = size + lo + hi - span
        if not ceil:
            return room // step + 1
        out = -(-room // step) + 1
        # ONNX/PyTorch: the last window must start inside the data or the leading padding
        return out - 1 if (out - 1) * step >= size + lo else out

    out_h = out_size(height, top, bottom, span_h, stride[0])
    out_w = out_size(width, left, right, span_w, stride[1])
    extra_h = max((out_h - 1) * stride[0] + span_h - (height + top + bottom), 0)
    extra_w = max((out_w - 1) * stride[1] + span_w - (width + left + right), 0)
    padded = np.pad(
        data,
        ((0, 0), (0, 0), (top, bottom + extra_h), (left, right + extra_w)),
        constant_values=fill,
    )
    return padded, (out_h, out_w), (span_h, span_w)


def max_pool_batch(
    data: np.ndarray,
    kernel: Pair,
    stride: Pair,
    *,
    dilation: Pair = (1, 1),
    pads: tuple[int, int, int, int] = (0, 0, 0, 0),
    ceil: bool = False,
    fill: int | float = 0,
) -> np.ndarray:
    """Max pooling of a batch (N, C, H, W), the same values as the maximum over
    `pool_windows_batch`'s windows, computed tap by tap (no window copy): the maximum along each
    row's taps first, then along each column's (a window's maximum, taken in two steps)."""
    padded, (out_h, out_w), _ = _pool_padded(data, kernel, stride, dilation, pads, ceil, fill)
    rows = _tap_max(padded, 3, kernel[1], stride[1], dilation[1], out_w)
    return _tap_max(rows, 2, kernel[0], stride[0], dilation[0], out_h)


def _tap_max(x: np.ndarray, axis: int, taps: int, stride: int, dilation: int, size: int):
    """The maximum over `taps` shifted, strided slices of `x` along `axis`, `size` long."""
    out: np.ndarray | None = None
    for k in range(taps):
        index = [slice(None)] * x.ndim
        index[axis] = slice(k * dilation, k * dilation + (size - 1) * stride + 1, stride)
        tap = x[tuple(index)]
        out = tap.copy() if out is None else np.maximum(out, tap, out=out)
    assert out is not None
    return out


def lookup_activation(q: np.ndarray, kind: str, exponent: int, out_fraction_bits: int = 7):
    """Integer sigmoid/tanh as a lookup table computes it: the input step is 2**-exponent, the
    output round(f(x) * 2**out_fraction_bits) half up, saturated to int8."""
    v = q.astype(np.float64) * 2.0**-exponent
    f = 1.0 / (1.0 + np.exp(-v)) if kind == "sigmoid" else np.tanh(v)
    out = np.floor(f * 2.0**out_fraction_bits + 0.5)
    return np.clip(out, -128, 127).astype(np.int64)
