"""Broken model and dataset files: each is one message naming the file, the line and the
layer; the user's own traceback only where the user's code raised (and marked); exit 1 and
nothing written."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from edgesynth.cli import main
from edgesynth.train.userfile import USER_TRACEBACK

HEADER = "from torch import nn\nimport edgesynth.nn as enn\n\n\n"
GOOD_INIT = """\
class Net(nn.Module):
    def __init__(self, num_classes=4, num_channels=1, dimensions=(12, 12)):
        super().__init__()
        self.conv = enn.FusedConv2dReLU(num_channels, 4, 3, padding=1)
        self.fc = enn.Linear(4 * 12 * 12, num_classes, wide=True)

    def forward(self, x):
        return self.fc(self.conv(x).flatten(1))
"""
GOOD_DATA = """\
import torch
from torch.utils.data import TensorDataset


def data():
    x = torch.zeros(16, 1, 12, 12)
    y = torch.arange(16) % 4
    return TensorDataset(x, y), TensorDataset(x, y)
"""

# name -> (model file text or None, dataset file text or None, option, expected text, line)
CASES = {
    "syntax error": (HEADER + "class Net(nn.Module:\n    pass\n", None, "Net", "syntax error", 5),
    "import error": (
        HEADER + "import not_a_module_here\n" + GOOD_INIT,
        None,
        "Net",
        "importing the file failed: ModuleNotFoundError",
        5,
    ),
    "missing class": (HEADER + GOOD_INIT, None, "Nett", "no network class `Nett`", None),
    "not a class": (HEADER + "def Net():\n    pass\n", None, "Net", "not a network class", 5),
    "wrong signature": (
        HEADER + GOOD_INIT.replace("dimensions=(12, 12)", "dimensions=(12, 12), *, depth"),
        None,
        "Net",
        "Net(...) needs `depth`",
        5,
    ),
    "torch layer": (
        HEADER
        + GOOD_INIT.replace(
            "enn.FusedConv2dReLU(num_channels, 4, 3, padding=1)",
            "nn.Conv2d(num_channels, 4, 3, padding=1)",
        ),
        None,
        "Net",
        "layer `conv` is a torch.nn.Conv2d, which the chip does not have",
        8,
    ),
    "kernel the chip lacks": (
        HEADER + GOOD_INIT.replace("4, 3, padding=1", "4, 5, padding=2"),
        None,
        "Net",
        "`kernel_size`=5 must be one of 1, 3",
        8,
    ),
    "wrong tensor shape": (
        HEADER + GOOD_INIT.replace("4 * 12 * 12", "4 * 6 * 6"),
        None,
        "Net",
        "layer `fc` (Linear) fails on synthetic's data (1x12x12 input): mat1 and mat2 shapes",
        12,
    ),
    "user code raises": (
        HEADER + GOOD_INIT.replace("super().__init__()", "super().__init__()\n        1 / 0"),
        None,
        "Net",
        "Net(...) failed: ZeroDivisionError: division by zero",
        8,
    ),
    "dataset function raises": (
        None,
        GOOD_DATA.replace("y = torch.arange(16) % 4", "y = torch.arange(16) % 4\n    [][1]"),
        "data",
        "data() failed: IndexError: list index out of range",
        8,
    ),
    "dataset items differ": (
        None,
        GOOD_DATA.replace(
            "return TensorDataset(x, y), TensorDataset(x, y)",
            "return [(x[0], 0), (x[0, :, :6], 1)], TensorDataset(x, y)",
        ),
        "data",
        "train[1] is 1x6x12; item 0 is 1x12x12",
        None,
    ),
    "dataset values out of range": (
        None,
        GOOD_DATA.replace("torch.zeros(16, 1, 12, 12)", "torch.full((16, 1, 12, 12), 255.0)"),
        "data",
        "train values span [255, 255]; the chip's inputs lie in [-1, 1)",
        None,
    ),
    "dataset returns one thing": (
        None,
        GOOD_DATA.replace("TensorDataset(x, y), TensorDataset(x, y)", "TensorDataset(x, y)"),
        "data",
        "returned TensorDataset; return (train, test",
        None,
    ),
    "dataset signature": (
        None,
        GOOD_DATA.replace("def data():", "def data(folder, split):"),
        "data",
        "data() takes 2 arguments",
        5,
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_broken_user_file_is_one_message(tmp_path: Path, capsys, case: str) -> None:
    model_text, data_text, name, expected, line = CASES[case]
    args = ["train", "--epochs", "1", "--no-progress", "--out-dir", str(tmp_path / "logs")]
    if model_text is not None:
        path = tmp_path / "net.py"
        path.write_text(model_text)
        args += ["--model-file", f"{path}:{name}", "--dataset", "synthetic"]
    else:
        path = tmp_path / "data.py"
        path.write_text(data_text)
        args += ["--dataset-file", f"{path}:{name}", "--model", "ai85netextrasmall"]
    status = main(args)
    err = capsys.readouterr().err
    assert status == 1, err
    first = err.splitlines()[0]
    assert first.startswith(f"edgesynth: error: {path}" + (f":{line}:" if line else ":")), err
    assert expected in err, err
    assert "Traceback (most recent call last)" not in err
    raised_by_user = case in ("import error", "user code raises", "dataset function raises")
    assert (USER_TRACEBACK in err) == raised_by_user, err
    if raised_by_user:  # the user's frames only: none of edgesynth's
        shown = err.split(USER_TRACEBACK)[1]
        assert f"{path.name}:{line} in" in shown and "edgesynth/" not in shown
    assert not (tmp_path / "logs").exists()


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--model-file", "net.py"], "expected FILE.py:NAME"),
        (["--model-file", "absent.py:Net"], "absent.py: `--model-file`: no such file"),
        (["--model-file", "{net}:Net", "--model-args", "[1]"], "expected a mapping"),
        (["--model-file", "{net}:Net", "--model-args", '{"widht": 3}'], "takes no argument"),
        (["--model-args", '{"width": 3}'], "--model-args needs --model-file"),
        (["--model", "ai85net5", "--model-file", "{net}:Net"], "not both"),
        (["--class-weights", "1,2"], "expected 4 weights"),
        (["--teacher-model", "ai85net5"], "needs --teacher CHECKPOINT"),
        (["--teacher", "absent.pth.tar"], "no such checkpoint"),
    ],
)
def test_bad_options_around_user_files(
    tmp_path: Path, capsys, monkeypatch, args: list[str], expected: str
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "net.py").write_text(HEADER + GOOD_INIT)
    argv = [a.replace("{net}", str(tmp_path / "net.py")) for a in args]
    status = main(["train", "--dataset", "synthetic", "--epochs", "1", *argv])
    err = capsys.readouterr().err
    assert status == 1 and expected in err and err.count("edgesynth: error:") == 1, err
    assert not (tmp_path / "logs").exists()


def test_a_shape_error_in_the_users_forward_shows_the_users_line(tmp_path: Path, capsys) -> None:
    """A `view` of the wrong size in the user's forward is the user's code failing."""
    text = HEADER + GOOD_INIT.replace(
        "return self.fc(self.conv(x).flatten(1))", "return self.fc(self.conv(x).view(-1, 7))"
    )
    path = tmp_path / "net.py"
    path.write_text(text)
    status = main(["train", "--dataset", "synthetic", "--model-file", f"{path}:Net"])
    err = capsys.readouterr().err
    assert status == 1
    assert err.startswith(f"edgesynth: error: {path}:12: Net.forward failed: RuntimeError"), err
    assert USER_TRACEBACK in err and textwrap.dedent("net.py:12 in forward") in err
