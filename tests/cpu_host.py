"""The generated cpu_part.c of a MAX7800x project built for this PC with a small driver: the
accelerator's unloaded words on stdin, the CPU part's result out (tests/max7800x/test_cpu_*)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np

import needs

CC = shutil.which("gcc") or "gcc"

_STAND_IN = (  # cnn.h and the softmax's types, for cpu_part.c alone
    "#include <stdint.h>\ntypedef int32_t q31_t;\ntypedef int16_t q15_t;\n"
    "typedef int8_t q7_t;\n#define CNN_OK 1\n#define CNN_FAIL 0\n"
    "void softmax_q17p14_q15(const q31_t *, const uint16_t, q15_t *);\n"
    "void softmax_q7_q15(const q7_t *, const uint16_t, q15_t *);\n"
)
_DRIVER = """#include <stdio.h>
#include <stdint.h>
#include "cpu_part.h"
static uint32_t in[CPU_PART_INPUT_WORDS];
int main(void) {
  unsigned v; int i, n = 0;
  for (;;) {
    for (i = 0; i < (int) (sizeof in / sizeof in[0]); i++)
      if (scanf("%u", &v) != 1) return n == 0; else in[i] = v;
    const void *out = cpu_part_forward(in);
    for (i = 0; i < CPU_PART_OUTPUTS; i++)
      printf("%d ", CPU_PART_WIDE ? ((const int32_t *) out)[i] : ((const int8_t *) out)[i]);
    printf("\\n");
    n++;
  }
}
"""


def host_build(project: Path, work: Path) -> Path:
    """cpu_part.c and softmax.c of `project` with the driver, gcc -Wall -Wextra -Werror."""
    needs.tool("gcc")
    work.mkdir(exist_ok=True)
    (work / "cnn.h").write_text(_STAND_IN)
    (work / "mxc.h").write_text("")
    (work / "driver.c").write_text(_DRIVER)
    for name in ("cpu_part.c", "cpu_part.h", "softmax.c"):  # beside the stand-in cnn.h
        shutil.copy(project / name, work / name)
    binary = work / "driver"
    subprocess.run(
        [CC, "-O2", "-Wall", "-Wextra", "-Werror", f"-I{work}", str(work / "cpu_part.c"),
         str(work / "softmax.c"), str(work / "driver.c"), "-o", str(binary)],
        check=True,
    )  # fmt: skip
    return binary


def words(x: np.ndarray, bits: int) -> np.ndarray:
    """Rows of values as cnn_unload() leaves them: 32-bit words (four int8 codes, or one int32)."""
    if bits == 32:
        return np.asarray(x, np.int64) & 0xFFFFFFFF
    codes = np.asarray(x).astype(np.int8).view(np.uint8)
    pad = (-codes.shape[1]) % 4
    codes = np.pad(codes, ((0, 0), (0, pad)))
    shifts = np.array([0, 8, 16, 24], np.uint32)
    return (codes.reshape(len(codes), -1, 4).astype(np.uint32) << shifts).sum(2)


def host_outputs(binary: Path, x: np.ndarray, bits: int) -> np.ndarray:
    """The host build's results for the rows of `x` (the accelerator's output values)."""
    stdin = "\n".join(" ".join(map(str, row)) for row in words(x, bits))
    done = subprocess.run([str(binary)], input=stdin, capture_output=True, text=True, check=True)
    return np.array([line.split() for line in done.stdout.splitlines()], dtype=np.int64)
