"""Issue 54, part 2 (the next tables are not the user): can a speaker embedding tell the test voices apart?

A numpy reference of Resemblyzer's GE2E voice encoder (PyPI `resemblyzer==0.1.4`, Apache-2.0: a 3-layer LSTM of
256 over a 40-band mel power spectrogram, 25 ms windows every 10 ms at 16 kHz, −30 dBFS normalization, 1.6 s
partials at 1.3 a second, ReLU(linear(last hidden state)), L2-normed, partials averaged), with its weights read
from the wheel's legacy torch pickle by the standard library's `pickle` (no torch). It embeds the same four
questions in espeak-ng voices and, given a WAV of Piper's joe voice saying several sentences, in joe's, and
prints the cosine similarities within and across voices. It is the reference a Rust port (candle) should
match, and the measurement behind the choice of test voices.

    python3 -m venv /tmp/spk && /tmp/spk/bin/pip install numpy scipy
    pip download --no-deps resemblyzer==0.1.4 -d /tmp/spk && unzip -o /tmp/spk/Resemblyzer-0.1.4-py3-none-any.whl -d /tmp/spk
    /tmp/spk/bin/python benches/scripts/speaker_embeddings.py /tmp/spk/resemblyzer/pretrained.pt [JOE.wav]

JOE.wav: any recording of the Piper voice, e.g. `agent.wav` of a `confab simulate` run whose agent has the local
voice and a language model that answers with several sentences. Measured (2026-11-29): espeak-ng voices are not
separable (same voice cosine ≥ 0.745, other voices up to 0.961); joe against every espeak voice is (joe–joe
0.798–0.891, joe–espeak ≤ 0.644).
"""

import collections
import itertools
import pickle
import struct
import subprocess
import sys
import tempfile
import wave

import numpy as np

SR, NFFT, HOP, NMELS, PARTIAL = 16_000, 400, 160, 40, 160
STORAGES = {"FloatStorage": (np.float32, 4), "LongStorage": (np.int64, 8), "IntStorage": (np.int32, 4)}
QUESTIONS = [
    "What time does the museum open on Sunday?",
    "Can you book a table for four people tonight?",
    "Which river flows through the city of Vienna?",
    "I would like to change my flight to Tuesday.",
]
ESPEAK_VOICES = ["en-us", "en-gb+f3", "en-us+m3", "en-gb-x-rp+f4", "en+klatt2"]


class _Storage:
    def __init__(self, kind, key):
        self.kind, self.key = kind, key


class _TorchUnpickler(pickle.Unpickler):
    """The objects of a legacy (pre-zip) torch file, tensors as (storage, offset, size, stride)."""

    def find_class(self, module, name):
        if (module, name) == ("collections", "OrderedDict"):
            return collections.OrderedDict
        if module == "torch._utils" and name in ("_rebuild_tensor_v2", "_rebuild_tensor"):
            return lambda storage, offset, size, stride, *rest: (storage, offset, tuple(size), tuple(stride))
        if module == "torch" and name in STORAGES:
            return name
        if module.startswith("torch"):
            return lambda *args, **kwargs: None
        return super().find_class(module, name)

    def persistent_load(self, pid):
        _, kind, key = pid[:3]
        return self.storages.setdefault(key, _Storage(kind, key))


def load_weights(path):
    """`model_state` of the checkpoint as numpy arrays, by name."""
    with open(path, "rb") as f:
        for _ in range(3):  # magic number, protocol version, system information
            pickle.load(f)
        unpickler = _TorchUnpickler(f)
        unpickler.storages = {}
        checkpoint = unpickler.load()
        data = {}
        for key in pickle.load(f):
            dtype, width = STORAGES[unpickler.storages[key].kind]
            count = struct.unpack("<q", f.read(8))[0]
            data[key] = np.frombuffer(f.read(count * width), dtype=dtype)
    weights = {}
    for name, value in checkpoint["model_state"].items():
        storage, offset, size, stride = value
        flat = data[storage.key]
        strides = tuple(s * flat.itemsize for s in stride)
        weights[name] = np.lib.stride_tricks.as_strided(flat[offset:], size, strides).copy()
    return weights


def _hz_to_mel(f):
    f = np.asanyarray(f, dtype=float)
    linear = f / (200.0 / 3)
    log = 15.0 + np.log(np.maximum(f, 1e-10) / 1000.0) / (np.log(6.4) / 27.0)
    return np.where(f >= 1000.0, log, linear)


def _mel_to_hz(m):
    m = np.asanyarray(m, dtype=float)
    return np.where(m >= 15.0, 1000.0 * np.exp(np.log(6.4) / 27.0 * (m - 15.0)), m * 200.0 / 3)


def mel_filters():
    """librosa's Slaney mel filters (40 bands, 0–8 kHz, area-normalized)."""
    bins = np.linspace(0, SR / 2, 1 + NFFT // 2)
    edges = _mel_to_hz(np.linspace(_hz_to_mel(0), _hz_to_mel(SR / 2), NMELS + 2))
    ramps = np.subtract.outer(edges, bins)
    widths = np.diff(edges)
    filters = np.array(
        [np.maximum(0, np.minimum(-ramps[i] / widths[i], ramps[i + 2] / widths[i + 1])) for i in range(NMELS)]
    )
    return filters * (2.0 / (edges[2:] - edges[:NMELS]))[:, None]


MEL = mel_filters()
WINDOW = 0.5 - 0.5 * np.cos(2 * np.pi * np.arange(NFFT) / NFFT)


def mel_power(wav):
    padded = np.pad(wav, NFFT // 2)
    frames = np.stack([padded[i * HOP : i * HOP + NFFT] * WINDOW for i in range(1 + (len(padded) - NFFT) // HOP)])
    return ((np.abs(np.fft.rfft(frames, axis=1)) ** 2) @ MEL.T).astype(np.float32)


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


def encode(weights, mels):
    """Embeddings of a batch of partials (batch, frames, 40)."""
    x = mels
    for layer in range(3):
        w_ih, w_hh = weights[f"lstm.weight_ih_l{layer}"], weights[f"lstm.weight_hh_l{layer}"]
        inputs = x @ w_ih.T + weights[f"lstm.bias_ih_l{layer}"] + weights[f"lstm.bias_hh_l{layer}"]
        h = np.zeros((x.shape[0], 256), np.float32)
        c = np.zeros_like(h)
        states = []
        for t in range(x.shape[1]):
            gates = inputs[:, t] + h @ w_hh.T
            i, f, g, o = np.split(gates, 4, axis=1)
            c = _sigmoid(f) * c + _sigmoid(i) * np.tanh(g)
            h = _sigmoid(o) * np.tanh(c)
            states.append(h)
        x = np.stack(states, 1)
    raw = np.maximum(0, h @ weights["linear.weight"].T + weights["linear.bias"])
    return raw / np.linalg.norm(raw, axis=1, keepdims=True)


def embed(weights, wav, rate=1.3, min_coverage=0.75):
    """One utterance's embedding: its 1.6 s partials' embeddings averaged, L2-normed."""
    rms = np.sqrt(np.mean(wav**2))
    wav = wav * (10 ** (-30 / 20) / max(rms, 1e-9))
    frames = int(np.ceil((len(wav) + 1) / HOP))
    step = int(round(SR / rate / HOP))
    starts = list(range(0, max(1, frames - PARTIAL + step + 1), step))
    if len(starts) > 1 and (len(wav) - starts[-1] * HOP) / (PARTIAL * HOP) < min_coverage:
        starts.pop()
    wav = np.pad(wav, (0, max(0, (starts[-1] + PARTIAL) * HOP - len(wav))))
    mel = mel_power(wav)
    partials = encode(weights, np.stack([mel[s : s + PARTIAL] for s in starts]))
    mean = partials.mean(0)
    return mean / np.linalg.norm(mean)


def read_wav(path):
    with wave.open(path) as w:
        assert w.getsampwidth() == 2 and w.getnchannels() == 1, "16-bit mono"
        audio = np.frombuffer(w.readframes(w.getnframes()), np.int16).astype(np.float32) / 32768
        rate = w.getframerate()
    if rate != SR:
        from math import gcd

        from scipy.signal import resample_poly

        g = gcd(rate, SR)
        audio = resample_poly(audio, SR // g, rate // g).astype(np.float32)
    return audio


def espeak(voice, text):
    with tempfile.NamedTemporaryFile(suffix=".wav") as out:
        subprocess.run(["espeak-ng", "-v", voice, "-s", "160", "-w", out.name, text], check=True)
        return read_wav(out.name)


def sentences(audio, min_silence_frames=12, min_frames=40):
    """The stretches of `audio` between pauses of 240 ms or more (20 ms frames above 1 % RMS)."""
    frames = audio[: len(audio) // 320 * 320].reshape(-1, 320)
    loud = np.sqrt((frames**2).mean(1)) > 0.01
    spans, start, quiet = [], None, 0
    for i, is_loud in enumerate(loud):
        if is_loud:
            start, quiet = (i if start is None else start), 0
        elif start is not None:
            quiet += 1
            if quiet >= min_silence_frames:
                spans.append((start, i - quiet + 1))
                start = None
    if start is not None:
        spans.append((start, len(loud)))
    return [audio[a * 320 : b * 320] for a, b in spans if b - a > min_frames]


def main():
    weights = load_weights(sys.argv[1])
    voices = {v: [embed(weights, espeak(v, q)) for q in QUESTIONS] for v in ESPEAK_VOICES}
    if len(sys.argv) > 2:
        voices["piper-joe"] = [embed(weights, s) for s in sentences(read_wav(sys.argv[2]))]
    for a, b in itertools.combinations_with_replacement(voices, 2):
        pairs = (
            itertools.combinations(voices[a], 2) if a == b else itertools.product(voices[a], voices[b])
        )
        cos = [float(x @ y) for x, y in pairs]
        print(f"{a:>14} {b:>14}: cosine min {min(cos):.3f} mean {np.mean(cos):.3f} max {max(cos):.3f}")


if __name__ == "__main__":
    main()
