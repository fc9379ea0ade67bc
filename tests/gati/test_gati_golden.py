"""`edgesynth gati compile` writes the same bytes as before the graph refactor.

The hashes in `golden_hashes.json` were recorded with the importer that preceded the network
graph (commit 16b1c34, `targets/gati/onnx_import.py`), for seeded onnx.helper models
(`gati_golden_models.py`) and the seeded torch modules of `test_gati_models.py` /
`test_gati_funcsim.py` exported with torch.onnx. The binary files are compared byte for byte;
`report.json` by its parsed values (`_canonical_report`: floats to 6 significant digits), since
the last digits of a calibration scale and the text's float formatting depend on the numeric
libraries' versions and the processor, not on edgesynth. Recording again (only after a deliberate
change of the output format): `EDGESYNTH_RECORD_GOLDEN=1 pytest tests/gati/test_gati_golden.py`.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import gati_golden_models as golden
import numpy as np
import pytest

HASHES = Path(__file__).parent / "golden_hashes.json"
RECORD = os.environ.get("EDGESYNTH_RECORD_GOLDEN") == "1"
TORCH_CASES = ["torch_sigmoid_tanh", "torch_avgpool", "torch_gap", "torch_mean",
               "torch_standalone", "torch_small_cnn"]  # fmt: skip


def _torch_case(name: str, folder: Path) -> tuple[Path, Path, list[str]]:
    from gati_netcheck import export_module
    from test_gati_funcsim import _small_cnn
    from test_gati_models import _data, _module

    if name == "torch_small_cnn":
        module, shape = _small_cnn(), (2, 8, 8)
    else:
        module, shape = _module(name.removeprefix("torch_")), (3, 16, 16)
    model = export_module(module, folder / "model.onnx", shape)
    calib = folder / "calib.npy"
    np.save(calib, _data(shape, 200))
    return model, calib, []


def _canonical(value: object) -> object:
    """The report's values with every float to 6 significant digits."""
    if isinstance(value, float):
        return float(f"{value:.6g}")
    if isinstance(value, dict):
        return {k: _canonical(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_canonical(v) for v in value]
    return value


def _canonical_report(path: Path) -> str:
    """The hash of report.json's parsed values (key order and float digits normalized)."""
    report = _canonical(json.loads(path.read_text()))
    return hashlib.sha256(json.dumps(report, sort_keys=True).encode()).hexdigest()


def _compile_hashes(name: str, folder: Path) -> dict[str, str]:
    from edgesynth.cli import main

    if name in golden.CASES:
        _, _, options = golden.write_case(name, folder)
    else:
        _, _, options = _torch_case(name, folder)
    cwd = Path.cwd()
    os.chdir(folder)  # report.json names the model as given: keep the path relative
    try:
        status = main(["gati", "compile", "model.onnx", "-c", "calib.npy", "-o", "out", *options])
    finally:
        os.chdir(cwd)
    assert status == 0
    out = folder / "out"
    assert (out / "compiled.json").is_file()  # the manifest (not hashed: not Gati's format)
    return {
        p.name: _canonical_report(p)
        if p.name == "report.json"
        else hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(out.iterdir())
        if p.name != "compiled.json"
    }


@pytest.mark.parametrize("name", [*golden.CASES, *TORCH_CASES])
def test_same_bytes_as_before(name: str, tmp_path: Path) -> None:
    got = _compile_hashes(name, tmp_path)
    assert len(got) == 5
    if RECORD:
        table = json.loads(HASHES.read_text()) if HASHES.exists() else {}
        table[name] = got
        HASHES.write_text(json.dumps(table, indent=1, sort_keys=True) + "\n")
        return
    want = json.loads(HASHES.read_text())[name]
    assert got == want
