"""The functional model: executes `script.bin` against an IMEM model and a DDR model holding
`filters.bin` and the images. Written from the documentation of the files (scriptmodel.py,
filters.py's format, imem.py's layout) and the seed's arithmetic (`sim.staged`); it reads the
script through the decoder, whose register map is its own (`executor/decode.py`), and never imports
the encoder, its register map (`regmap.py`) or the lowering (tests/test_import_rules.py).

Batches run together: the IMEM is modelled as one byte array per image.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from edgesynth.errors import EdgesynthError
from edgesynth.sim import ops
from edgesynth.sim.staged import saturate, shift_scale_bias
from edgesynth.targets.xdnn import device as dev
from edgesynth.targets.xdnn.executor.decode import decode
from edgesynth.targets.xdnn.scriptmodel import Script, ScriptCommand

BATCH_CHUNK = 16


def _pitch(width: int, imem_width: int) -> int:
    return max(dev.next_pow2(width * 2), imem_width)


@dataclass
class Machine:
    script: Script
    filters: bytes
    imem_width: int
    completion: list[int] = field(default_factory=lambda: [0] * 8)
    int_status: int = 0

    # -- IMEM volumes ---------------------------------------------------------------------
    def _span(self, addr: int, c: int, h: int, w: int) -> tuple[int, int]:
        size = _pitch(w, self.imem_width) * h * (c + (c & 1))
        if addr < 0 or addr + size > self.script.imem_bytes:
            raise EdgesynthError(
                f"IMEM access 0x{addr:x}..0x{addr + size:x} outside the "
                f"{self.script.imem_bytes}-byte image memory"
            )
        return addr, size

    def _volume(self, imem: np.ndarray, addr: int, c: int, h: int, w: int) -> np.ndarray:
        """The IMEM bytes of a (c, h, w) volume at `addr` of every image, viewed (no copy) as
        (N, channel pairs, rows, pitch / 2 columns, 2 channels) little-endian 16-bit values: a
        pair of channels interleaved along each row, rows `pitch` bytes apart."""
        a, size = self._span(addr, c, h, w)
        pitch = _pitch(w, self.imem_width)
        return imem[:, a : a + size].view("<i2").reshape(len(imem), (c + 1) // 2, h, pitch // 2, 2)

    def read(self, imem: np.ndarray, addr: int, c: int, h: int, w: int) -> np.ndarray:
        vol = self._volume(imem, addr, c, h, w)
        out = np.empty((len(imem), c, h, w), dtype=np.int64)
        out[:, 0::2] = vol[:, : (c + 1) // 2, :, :w, 0]  # even channels: the pairs' first
        out[:, 1::2] = vol[:, : c // 2, :, :w, 1]
        return out

    def write(self, imem: np.ndarray, addr: int, data: np.ndarray) -> None:
        """`data` (N, c, h, w) into the volume at `addr`; the rest of its span (the row's
        padding columns, an odd depth's last pair's second channel) zero."""
        c, w = data.shape[1], data.shape[3]
        vol = self._volume(imem, addr, c, data.shape[2], w)
        vol[...] = 0
        vol[:, : (c + 1) // 2, :, :w, 0] = data[:, 0::2]
        vol[:, : c // 2, :, :w, 1] = data[:, 1::2]

    # -- commands -------------------------------------------------------------------------
    def _finish(self, f: dict[str, int], x: np.ndarray) -> np.ndarray:
        if f.get("data_8bit"):
            x = saturate(x, 8)
        if f.get("relu"):
            x = np.maximum(x, 0)
        return x

    def conv(self, imem: np.ndarray, f: dict[str, int]) -> None:
        self._check_output_size(f)
        x = self.read(imem, f["in_addr"], f["in_c"], f["in_h"], f["in_w"])
        oc, ic, kh, kw = f["out_c"], f["in_c"], f["kernel_h"], f["kernel_w"]
        o32 = -(-oc // dev.FILTER_OUTPUT_MULTIPLE) * dev.FILTER_OUTPUT_MULTIPLE
        ie = ic + (ic & 1)
        nw = o32 * ie * kh * kw
        wbytes = self.filters[f["filter_offset"] : f["filter_offset"] + 2 * nw]
        qbytes = self.filters[f["quant_offset"] : f["quant_offset"] + 8 * o32]
        if len(wbytes) != 2 * nw or len(qbytes) != 8 * o32:
            raise EdgesynthError(f"command {f['command_id']}: filters.bin is too short")
        weight = np.frombuffer(wbytes, "<i2").reshape(o32, ie, kh, kw)[:oc, :ic]
        q = np.frombuffer(qbytes, "<i2").reshape(o32, 4)[:oc].astype(np.int64)
        if not f["per_channel"]:
            q = np.tile([f["preshift"], f["scale"], f["postshift"], f["bias"]], (oc, 1))
        if not f["bias_enable"]:
            q[:, 3] = 0
        acc = self._conv_sum(x, weight, f)  # 16-bit weights: the products are exact
        y = shift_scale_bias(
            acc,
            pre=q[:, 0],
            scale=q[:, 1],
            post=q[:, 2],
            bias=q[:, 3],
            bits=dev.DATA_BITS,
            acc_bits=dev.ACC_BITS,
        )
        self.write(imem, f["out_addr"], self._finish(f, y))

    @staticmethod
    def _check_output_size(f: dict[str, int]) -> None:
        """Every output row and column's window starts inside the input (after the top/left
        padding): an output size that does not follow from the input is refused."""
        for axis in "hw":
            n_in, n_out, s, p = (
                f[f"in_{axis}"],
                f[f"out_{axis}"],
                f[f"stride_{axis}"],
                f[f"pad_{axis}"],
            )
            if s == 0 or n_out == 0 or (n_out - 1) * s - p > n_in - 1:
                raise EdgesynthError(
                    f"command {f['command_id']}: out_{axis} {n_out} does not follow from in_{axis} "
                    f"{n_in}, stride {s}, pad {p}"
                )

    def _conv_sum(self, x: np.ndarray, weight: np.ndarray, f: dict[str, int]) -> np.ndarray:
        kh, kw = weight.shape[2:]
        sh, sw, dh, dw = f["stride_h"], f["stride_w"], f["dilation_h"], f["dilation_w"]
        ph, pw, oh, ow = f["pad_h"], f["pad_w"], f["out_h"], f["out_w"]
        h, w = x.shape[2:]
        bottom = max(0, (oh - 1) * sh + (kh - 1) * dh + 1 - h - ph)
        right = max(0, (ow - 1) * sw + (kw - 1) * dw + 1 - w - pw)
        out = ops.conv2d_batch(
            x, weight, None, stride=(sh, sw), pads=(ph, pw, bottom, right), dilation=(dh, dw)
        )
        return out[:, :, :oh, :ow]

    def pool(self, imem: np.ndarray, f: dict[str, int], kind: str) -> None:
        self._check_output_size(f)
        x = self.read(imem, f["in_addr"], f["in_c"], f["in_h"], f["in_w"])
        kh, kw, sh, sw = f["kernel_h"], f["kernel_w"], f["stride_h"], f["stride_w"]
        ph, pw, oh, ow = f["pad_h"], f["pad_w"], f["out_h"], f["out_w"]
        h, w = x.shape[2:]
        pads = (ph, pw, max(0, (oh - 1) * sh + kh - h - ph), max(0, (ow - 1) * sw + kw - w - pw))
        if kind == "max":
            low = np.iinfo(np.int64).min
            y = ops.max_pool_batch(x, (kh, kw), (sh, sw), pads=pads, fill=low)[:, :, :oh, :ow]
        else:
            win, _ = ops.pool_windows_batch(x, (kh, kw), (sh, sw), pads=pads)
            m, s = f["scale"], f["postshift"]  # the window sum x scale >> post-shift
            y = saturate((win.sum(axis=-1)[:, :, :oh, :ow] * m) >> s, dev.DATA_BITS)
        self.write(imem, f["out_addr"], self._finish(f, y))

    def eltwise(self, imem: np.ndarray, f: dict[str, int]) -> None:
        a = self.read(imem, f["in_addr"], f["in_c"], f["in_h"], f["in_w"])
        b = self.read(imem, f["in_b_addr"], f["in_c"], f["in_h"], f["in_w"])
        if not f["eltwise_add"]:
            raise EdgesynthError(f"command {f['command_id']}: only element-wise add is modelled")
        self.write(imem, f["out_addr"], self._finish(f, saturate(a + b, dev.DATA_BITS)))

    # -- a batch of images ----------------------------------------------------------------
    def run(self, images: np.ndarray) -> np.ndarray:
        """Run the script once per image (N, C, H, W) ints; return the uploaded outputs."""
        outs = [
            self._run_chunk(images[i : i + BATCH_CHUNK]) for i in range(0, len(images), BATCH_CHUNK)
        ]
        for k in range(len(images)):  # completion vectors: one bit per image job
            self.completion[(k // 32) % 8] |= 1 << (k % 32)
            self.int_status |= 1 << ((k // 32) % 8)
        return np.concatenate(outs) if outs else np.zeros((0,), np.int64)

    def _run_chunk(self, images: np.ndarray) -> np.ndarray:
        n = len(images)
        imem = np.zeros((n, self.script.imem_bytes), dtype=np.uint8)
        ddr_in: dict[int, np.ndarray] = {}
        result: np.ndarray | None = None
        gathers = [c for c in self.script.commands if c.op == "XNGather"]
        if len(gathers) != 1:
            raise EdgesynthError(f"the script downloads {len(gathers)} images; one is modelled")
        ddr_in[gathers[0].fields["ddr_offset"]] = np.asarray(images, dtype=np.int64)
        for cmd in self.script.commands:
            result = self._step(imem, cmd, ddr_in) if cmd.op == "XNUpload" else result
            if cmd.op != "XNUpload":
                self._step(imem, cmd, ddr_in)
        if result is None:
            raise EdgesynthError("the script uploads nothing")
        return result

    def _step(self, imem: np.ndarray, cmd: ScriptCommand, ddr: dict[int, np.ndarray]):
        f = cmd.fields
        if cmd.op == "XNGather":
            img = ddr[f["ddr_offset"]]
            want = (f["in_c"], f["in_h"], f["in_w"])
            if tuple(img.shape[1:]) != want:
                raise EdgesynthError(
                    f"the program downloads {'x'.join(map(str, want))} images, not "
                    f"{'x'.join(map(str, img.shape[1:]))}"
                )
            rows = img[:, :, f["start_row"] : f["end_row"] + 1]
            self.write(imem, f["out_addr"], saturate(rows, dev.DATA_BITS))
        elif cmd.op == "XNConv":
            self.conv(imem, f)
        elif cmd.op == "XNMaxPool":
            self.pool(imem, f, "max")
        elif cmd.op == "XNAvgPool":
            self.pool(imem, f, "avg")
        elif cmd.op == "XNEltwise":
            self.eltwise(imem, f)
        elif cmd.op == "XNUpload":
            return self.read(imem, f["in_addr"], f["in_c"], f["in_h"], f["in_w"])
        return None


def load_machine(
    script_bytes: bytes,
    filters: bytes,
    engine_imem_width: int | None = None,
    source: str = "script.bin",
) -> Machine:
    script = decode(script_bytes, source)
    width = engine_imem_width or dev.next_pow2(script.dsp_pixels * 2)
    return Machine(script, filters, width)
