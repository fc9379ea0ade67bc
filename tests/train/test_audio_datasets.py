"""Keyword spotting (KWS20) from Speech Commands v2 wav folders written by the test in the real
format: the 128x128 inputs against a reference written out step by step, labels, splits,
refusals, the download path, and a short training run checked by the synthesizer's simulator.
"""

from __future__ import annotations

import os
import tarfile
import wave
from pathlib import Path

import numpy as np
import pytest
import torch

from edgesynth.cli import main
from edgesynth.errors import EdgesynthError
from edgesynth.train import audio_datasets
from edgesynth.train.datasets import load_dataset

RNG = np.random.default_rng(7)


def _wav(path: Path, samples: np.ndarray, rate: int = 16000) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(samples.astype("<i2").tobytes())


def _speech(n: int) -> np.ndarray:
    t = np.arange(n)
    tone = 9000 * np.sin(t * 0.05) * np.exp(-(((t - n / 2) / (n / 5)) ** 2))
    return np.round(tone + RNG.normal(0, 300, n)).astype(np.int16)


# (word, file, length in samples, listed for testing)
RECORDINGS = [
    ("yes", "a_nohash_0.wav", 16000, False),
    ("yes", "b_nohash_0.wav", 12000, True),
    ("no", "a_nohash_0.wav", 16000, False),
    ("no", "c_nohash_1.wav", 21000, True),  # longer than 16,384 + margins: the middle kept
    ("cat", "a_nohash_0.wav", 8000, False),  # not a keyword: UNKNOWN
    ("zero", "d_nohash_0.wav", 19584, False),  # speech exactly 16,384 samples long
]


def _tree(root: Path) -> dict[tuple[str, str], np.ndarray]:
    written = {}
    for word, name, n, _ in RECORDINGS:
        written[(word, name)] = _speech(n)
        _wav(root / word / name, written[(word, name)])
    _wav(root / "_background_noise_" / "noise.wav", _speech(40000))
    (root / "testing_list.txt").write_text(
        "".join(f"{w}/{f}\n" for w, f, _, test in RECORDINGS if test)
    )
    (root / "validation_list.txt").write_text("yes/a_nohash_0.wav\n")
    return written


def _reference(pcm: np.ndarray) -> np.ndarray:
    """The vendor's preparation of one recording, one step at a time."""
    audio = pcm.astype(np.float32) / np.float32(32768)
    audio = audio / np.max(np.abs(audio))
    n, margin, length = len(audio), 1600, 16384
    begin, end = margin, n - margin
    padded = np.zeros(max(n, length), np.float32)
    padded[:n] = audio
    if end - begin <= length:
        stop = max(end, length)
        seg = padded[stop - length : stop]
    else:
        middle = (begin + end) // 2
        seg = padded[middle - length // 2 : middle + length // 2]
    out = np.zeros((128, 128), np.int64)
    for t in range(128):
        for c in range(128):
            level = np.round((seg[t * 128 + c] + np.float32(1.0)) / np.float32(2.0 / 256))
            out[c, t] = int(min(max(level, 0), 255)) - 128
    return out


def test_kws20_inputs_labels_and_splits(tmp_path: Path) -> None:
    written = _tree(tmp_path)
    ds = load_dataset("kws20", tmp_path)
    assert ds.classes[:3] == ["up", "down", "left"] and ds.classes[-1] == "UNKNOWN"
    assert ds.num_classes == 21 and ds.class_weights is not None
    assert ds.class_weights[-1] == pytest.approx(0.07) and set(ds.class_weights[:20]) == {1.0}
    assert ds.input_shape == (128, 128)
    # sorted by word, then file; the noise folder is no word
    order = sorted((w, f) for w, f, _, _ in RECORDINGS)
    test_items = [
        (w, f) for w, f in order if (w, f, True) in {(a, b, c) for a, b, _, c in RECORDINGS}
    ]
    train_items = [item for item in order if item not in test_items]
    label = {"yes": 6, "no": 7, "zero": 19, "cat": 20}
    for split, items in ((ds.train, train_items), (ds.test, test_items)):
        assert split.y.tolist() == [label[w] for w, _ in items]
        for x, item in zip(split.x, items, strict=True):
            got = np.round(x.numpy().astype(np.float64) * 128).astype(np.int64)
            np.testing.assert_array_equal(got, _reference(written[item]))


def test_processed_recordings_are_kept_and_remade_when_a_file_changes(
    tmp_path: Path, monkeypatch
) -> None:
    """The second load reads the processed cache (not one wav file); touching a recording
    makes it again."""
    from edgesynth.train import audio_datasets

    _tree(tmp_path)
    first = load_dataset("kws20", tmp_path)
    cache = tmp_path / audio_datasets.CACHE_NAME
    assert cache.is_file() and list(tmp_path.glob(".edgesynth-kws20*")) == [cache]

    def no_wav(path):  # type: ignore[no-untyped-def]
        raise AssertionError(f"read {path}")

    monkeypatch.setattr(audio_datasets, "read_wav", no_wav)
    again = load_dataset("kws20", tmp_path)
    assert torch.equal(first.train.x, again.train.x) and torch.equal(first.test.y, again.test.y)
    monkeypatch.undo()
    word, name = RECORDINGS[0][0], RECORDINGS[0][1]
    wav = tmp_path / word / name
    os.utime(wav, ns=(wav.stat().st_atime_ns, wav.stat().st_mtime_ns + 10**9))
    seen = []
    real = audio_datasets.read_wav
    monkeypatch.setattr(audio_datasets, "read_wav", lambda p: seen.append(p) or real(p))
    load_dataset("kws20", tmp_path)
    assert len(seen) == len(RECORDINGS)


def test_a_recording_at_another_rate_is_named(tmp_path: Path) -> None:
    _tree(tmp_path)
    _wav(tmp_path / "up" / "slow.wav", _speech(8000), rate=8000)
    with pytest.raises(EdgesynthError) as err:
        load_dataset("kws20", tmp_path)
    assert err.value.file == str(tmp_path / "up" / "slow.wav")
    assert "8000 Hz" in err.value.message and "16000 Hz mono 16-bit" in err.value.message


def test_missing_dataset_names_the_url_and_writes_nothing(tmp_path: Path) -> None:
    with pytest.raises(EdgesynthError) as err:
        load_dataset("kws20", tmp_path)
    assert audio_datasets.SPEECH_COMMANDS_URL in err.value.message
    assert "--download" in err.value.message
    assert list(tmp_path.iterdir()) == []


def test_download_unpacks_the_archive_into_its_own_folder(tmp_path: Path, monkeypatch) -> None:
    source = tmp_path / "src"
    _tree(source)
    archive = tmp_path / "speech_commands_v0.02.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:  # like the real one: no top-level folder
        for path in sorted(source.rglob("*")):
            tar.add(path, arcname=f"./{path.relative_to(source)}", recursive=False)
    monkeypatch.setattr(audio_datasets, "SPEECH_COMMANDS_URL", archive.as_uri())
    data = tmp_path / "data"
    ds = load_dataset("kws20", data, allow_download=True)
    assert len(ds.train) + len(ds.test) == len(RECORDINGS)
    assert [p.name for p in data.iterdir()] == ["speech_commands_v0.02"]


@pytest.mark.train
def test_keyword_spotting_trains_and_the_simulator_agrees(tmp_path: Path, capsys) -> None:
    _tree(tmp_path / "sc")
    policy = tmp_path / "policy.yaml"
    policy.write_text("start_epoch: 1\nweight_bits: 8\n")
    status = main(
        [
            "train",
            "--dataset",
            "kws20",
            "--data",
            str(tmp_path / "sc"),
            "--epochs",
            "2",
            "--qat-policy",
            str(policy),
            "--device",
            "cpu",
            "--no-progress",
            "--deterministic",
            "--simulate",
            "2",
            "--save-sample",
            "0",
            "--out-dir",
            str(tmp_path / "logs"),
            "--name",
            "kws",
        ]
    )
    out = capsys.readouterr().out
    assert status == 0, out
    assert "Training ai85kws20netv3 on KWS20" in out
    assert "identical outputs 100.00%" in out
    sample = np.load(tmp_path / "logs" / "kws" / "sample_kws20.npy")
    assert sample.shape == (128, 128) and sample.min() >= -128 and sample.max() <= 127


def _vendor_augmentation(level: np.ndarray, shift: int, snr_db: int, noise: np.ndarray):
    """The vendor's steps on one recording's 8-bit levels (0..255), written out."""
    shifted = np.roll(level, shift)
    var = shifted.astype(np.float64).var(ddof=1)
    scaled = noise * np.sqrt(var / 10 ** (snr_db / 10))
    return np.clip(shifted + np.trunc(scaled), 0, 255)


def test_audio_augmentation_is_the_vendors_shift_and_noise() -> None:
    import torch

    gen = np.random.default_rng(3)
    levels = gen.integers(60, 200, size=(3, 16384)).astype(np.float64)
    folded = ((levels - 128) / 128).reshape(3, 128, 128).transpose(0, 2, 1)
    x = torch.from_numpy(folded.astype(np.float32))
    seed = torch.Generator().manual_seed(11)
    got = audio_datasets.augment_audio(x, seed)
    # the same draws, in the same order, from the same generator
    draws = torch.Generator().manual_seed(11)
    shifts = torch.randint(-1600, 1984, (3, 1), generator=draws)[:, 0].numpy()
    snr = torch.trunc(-5 + 25 * torch.rand(3, 1, generator=draws))[:, 0].numpy()
    noise = torch.randn(3, 16384, generator=draws).double().numpy()
    for i in range(3):
        expected = _vendor_augmentation(levels[i], int(shifts[i]), int(snr[i]), noise[i])
        unfolded = got[i].double().numpy().T.reshape(-1) * 128 + 128
        np.testing.assert_allclose(unfolded, expected, atol=1.0)  # float32 noise vs float64
        assert np.array_equal(unfolded, np.round(unfolded))  # still on the 8-bit grid
    assert got.shape == x.shape and got.min() >= -1.0 and got.max() <= 127 / 128
