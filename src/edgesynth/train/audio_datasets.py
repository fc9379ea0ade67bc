"""Keyword spotting from Google Speech Commands v2 (wav folders), as the vendor's KWS20 inputs.

The vendor's keyword-spotting networks take one second of 16 kHz audio as 128 channels of 128
samples. Each recording is turned into that input the way the vendor's training prepares it:
- scaled so its largest sample is +-1 (float32),
- cut or zero-padded to 16,384 samples: with 0.1 s of margin at each end, a recording whose
  speech fits in 16,384 samples ends where its margin starts (zero padding after a short one),
  a longer one keeps the 16,384 samples around its middle,
- quantized to 8 bits, round((x + 1) * 128) clipped to 0..255, minus 128 for the chip,
- folded: channel c, step t holds sample 128 t + c.
Classes: the 20 keywords in the vendor's order, then UNKNOWN for every other word. The files
named in `testing_list.txt` are the test set; all others (validation list included, as the
vendor does) train. The vendor's loss weighs UNKNOWN 0.07 (it outnumbers each keyword).

Training adds the vendor's shift-and-noise augmentation to every batch (`augment_audio`);
not reproduced: its speed augmentation (3x the data) and its LibriSpeech unknowns.
"""

from __future__ import annotations

import contextlib
import hashlib
import shutil
import wave
from pathlib import Path

import numpy as np
import torch

from edgesynth.errors import EdgesynthError
from edgesynth.outputs import write_file_atomic
from edgesynth.train.datasets import Dataset, Split

SPEECH_COMMANDS_URL = "http://download.tensorflow.org/data/speech_commands_v0.02.tar.gz"
SPEECH_COMMANDS_FOLDER = "speech_commands_v0.02"
KWS20_KEYWORDS = (
    "up", "down", "left", "right", "stop", "go", "yes", "no", "on", "off",
    "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "zero",
)  # fmt: skip
UNKNOWN_WEIGHT = 0.07
SAMPLE_RATE = 16000
ROW = 128  # samples per step = channels of the folded input
SEGMENT = ROW * ROW  # 16,384 samples
MARGIN = SAMPLE_RATE // 10  # 0.1 s at each end
NOT_WORDS = ("_background_noise_", "silence")


def read_wav(path: Path) -> np.ndarray:
    """A 16 kHz mono 16-bit PCM wav as float32 in [-1, 1), as librosa reads it."""
    try:
        with wave.open(str(path), "rb") as w:
            rate, channels, width = w.getframerate(), w.getnchannels(), w.getsampwidth()
            frames = w.readframes(w.getnframes())
    except (wave.Error, EOFError, OSError) as err:
        raise EdgesynthError(f"not a readable wav file ({err}).", file=str(path)) from None
    if (rate, channels, width) != (SAMPLE_RATE, 1, 2):
        raise EdgesynthError(
            f"{rate} Hz, {channels} channel(s), {8 * width}-bit: keyword spotting takes "
            f"{SAMPLE_RATE} Hz mono 16-bit PCM (as Speech Commands is); convert it first.",
            file=str(path),
        )
    return np.frombuffer(frames, dtype="<i2").astype(np.float32) / np.float32(32768)


def segment(audio: np.ndarray) -> np.ndarray:
    """The 16,384 samples the network hears (the vendor's rule, without augmentation)."""
    n = len(audio)
    begin, end = MARGIN, n - MARGIN
    if n < SEGMENT:
        audio = np.concatenate([audio, np.zeros(SEGMENT - n, audio.dtype)])
    if end - begin <= SEGMENT:
        stop = max(end, SEGMENT)
        return audio[stop - SEGMENT : stop]
    middle = (begin + end) // 2
    return audio[middle - SEGMENT // 2 : middle + SEGMENT // 2]


def chip_samples(audio: np.ndarray) -> np.ndarray:
    """A recording (float32) as the chip's 128 x 128 int8 input."""
    peak = np.max(np.abs(audio)) if audio.size else np.float32(0)
    scaled = audio / peak if peak > 0 else audio
    seg = segment(scaled.astype(np.float32))
    q = np.clip(np.round((seg - np.float32(-1.0)) / np.float32(2.0 / 256)), 0, 255)
    return (q.astype(np.int16) - 128).astype(np.int8).reshape(ROW, ROW).T


def _root(folder: Path) -> Path:
    nested = folder / SPEECH_COMMANDS_FOLDER
    return nested if nested.is_dir() else folder


def _recordings(root: Path) -> list[tuple[str, str]]:
    """(word, file name) of every recording, sorted."""
    out = []
    for word_dir in sorted(p for p in root.iterdir() if p.is_dir()):
        word = word_dir.name
        if word in NOT_WORDS or not word[:1].isalpha():
            continue
        out.extend((word, f.name) for f in sorted(word_dir.glob("*.wav")))
    return out


def _listed(root: Path, name: str) -> set[str]:
    path = root / name
    if not path.is_file():
        return set()
    return {line.strip() for line in path.read_text().splitlines() if line.strip()}


# The processed recordings are kept beside them (one file, replaced whole), keyed by what they
# were made from: every recording's name, size and modification time, the test list, and the
# processing version. A data-parallel run's processes and later runs read it instead of 105,000
# wav files.
CACHE_NAME = ".edgesynth-kws20.npz"
CACHE_VERSION = "1"


def _fingerprint(root: Path, recordings: list[tuple[str, str]]) -> str:
    digest = hashlib.sha256(CACHE_VERSION.encode())
    for word, name in recordings:
        stat = (root / word / name).stat()
        digest.update(f"{word}/{name}:{stat.st_size}:{stat.st_mtime_ns}\n".encode())
    digest.update((root / "testing_list.txt").read_bytes())
    return digest.hexdigest()


def _processed(
    root: Path, recordings: list[tuple[str, str]]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(inputs as int8 levels, labels, is-test) of every recording, from the cache when it
    was made from the same files."""
    key = _fingerprint(root, recordings)
    cache = root / CACHE_NAME
    if cache.is_file():
        try:
            with np.load(cache, allow_pickle=False) as kept:
                if str(kept["key"]) == key:
                    return kept["x"], kept["y"], kept["is_test"]
        except (OSError, ValueError, KeyError):
            pass  # unreadable: made again below
    testing = _listed(root, "testing_list.txt")
    label_of = {w: i for i, w in enumerate(KWS20_KEYWORDS)}
    x = np.empty((len(recordings), ROW, ROW), dtype=np.int8)
    y = np.empty(len(recordings), dtype=np.int64)
    is_test = np.empty(len(recordings), dtype=bool)
    for i, (word, name) in enumerate(recordings):
        x[i] = chip_samples(read_wav(root / word / name))
        y[i] = label_of.get(word, len(KWS20_KEYWORDS))
        is_test[i] = f"{word}/{name}" in testing
    with contextlib.suppress(EdgesynthError):  # a read-only data folder goes without the cache
        write_file_atomic(
            cache,
            writer=lambda handle: np.savez(handle, key=np.array(key), x=x, y=y, is_test=is_test),
            overwrite=True,  # edgesynth's own cache, remade when stale
        )
    return x, y, is_test


def load_kws20(data: Path | None, allow_download: bool = False) -> Dataset:
    folder = Path(data) if data is not None else Path("data") / "speech_commands"
    if folder.exists() and not folder.is_dir():
        raise EdgesynthError("--data must be a folder.", file=str(folder))
    root = _root(folder)
    if not (root / "testing_list.txt").is_file():
        if not allow_download:
            raise EdgesynthError(
                "Speech Commands v2 is not here (no testing_list.txt). Extract "
                f"{SPEECH_COMMANDS_URL} into this folder (its word folders and lists), or "
                "pass --download to fetch it (2.3 GB).",
                file=str(folder),
            )
        from edgesynth.train.image_datasets import fetch_archive

        created = not folder.exists()
        folder.mkdir(parents=True, exist_ok=True)
        try:
            fetch_archive(SPEECH_COMMANDS_URL, folder, SPEECH_COMMANDS_FOLDER, rooted=False)
        except BaseException:
            if created:
                shutil.rmtree(folder, ignore_errors=True)
            raise
        return load_kws20(folder, False)
    recordings = _recordings(root)
    unknown = len(KWS20_KEYWORDS)
    x, y, is_test = _processed(root, recordings)
    if not is_test.any() or is_test.all():
        raise EdgesynthError(
            "testing_list.txt names none (or all) of the recordings here; it must name the "
            "test recordings as `word/file.wav`.",
            file=str(root / "testing_list.txt"),
        )

    def split(mask: np.ndarray) -> Split:
        inputs = torch.from_numpy(x[mask].astype(np.float32) / 128.0)
        return Split(inputs, torch.from_numpy(y[mask]))

    weights = [1.0] * len(KWS20_KEYWORDS) + [UNKNOWN_WEIGHT]
    return Dataset(
        "KWS20",
        split(~is_test),
        split(is_test),
        unknown + 1,
        [*KWS20_KEYWORDS, "UNKNOWN"],
        augment=True,
        kind="audio",
        class_weights=weights,
    )


# The vendor's augmentation of a one-second recording: a circular shift of the 16,384 samples
# between -0.1 s and the end of the speech (the segment rule's limits for 16,000 samples), and
# white noise at an SNR drawn uniformly between -5 and 20 dB (whole dB, truncated), added to the
# 8-bit levels and clipped to them.
SHIFT_LIMITS = (-MARGIN, SEGMENT - (SAMPLE_RATE - MARGIN))
SNR_DB = (-5.0, 20.0)


def augment_audio(x: torch.Tensor, gen: torch.Generator | None) -> torch.Tensor:
    """A batch of folded recordings (N, 128, 128), each shifted and given noise as the vendor's
    training does; the result is back on the 8-bit grid."""
    n = x.shape[0]
    device = x.device
    levels = torch.round(x.transpose(1, 2).reshape(n, SEGMENT) * 128) + 128  # 0..255
    lo, hi = SHIFT_LIMITS
    shift = torch.randint(lo, hi, (n, 1), generator=gen).to(device)
    index = (torch.arange(SEGMENT, device=device)[None, :] - shift) % SEGMENT
    levels = torch.gather(levels, 1, index)
    snr = torch.trunc(SNR_DB[0] + (SNR_DB[1] - SNR_DB[0]) * torch.rand(n, 1, generator=gen))
    std = torch.sqrt(levels.var(dim=1, keepdim=True) / 10 ** (snr.to(device) / 10))
    noise = torch.trunc(torch.randn(n, SEGMENT, generator=gen).to(device) * std)
    levels = torch.clamp(levels + noise, 0, 255)
    return ((levels - 128) / 128).reshape(n, ROW, ROW).transpose(1, 2).to(x.dtype)
