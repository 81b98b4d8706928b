//! Moonshine Base (English) through ONNX Runtime: the encoder reads the raw 16 kHz samples (no log-mel),
//! the merged decoder writes the text greedily, one token per call, with its self-attention keys and values
//! kept between calls and the cross-attention ones computed once per utterance.
//!
//! The model is the `.ort` encoder/decoder pair shipped in the `moonshine-cpp` wheel (MIT), saved as ONNX
//! at fetch time (`convert`: several times faster); the tokenizer is `useful-moonshine-onnx`'s
//! `tokenizer.json`. Long pauses are shortened before reading ([`pauses`]); utterances longer than
//! [`MAX_CHUNK_SECONDS`] are read in consecutive chunks and the texts joined.

pub mod convert;
pub mod pauses;

use std::path::Path;

use ort::session::Session;
use ort::value::{DynValue, Tensor, TensorRef};
use tokenizers::Tokenizer;

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

/// The most probable token other than the end token.
fn best_but_end(logits: &[f32]) -> i64 {
    let mut best = None::<(usize, f32)>;
    for (index, &logit) in logits.iter().enumerate() {
        if index as i64 != END_TOKEN && best.is_none_or(|(_, top)| logit > top) {
            best = Some((index, logit));
        }
    }
    best.map_or(END_TOKEN, |(index, _)| index as i64)
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
        Ok(MoonshineStt { encoder, decoder, tokenizer, slots, empty_cache_shape, threads: intra_threads })
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
                texts.push(text.to_string());
            }
        }
        Ok(texts.join(" "))
    }

    /// Greedy decoding of one chunk: the text's token ids, without the start and end tokens. `speech`: the
    /// chunk surely holds words (an unsure end at the first step gives way to the best word).
    fn decode(&mut self, audio: &[f32], speech: bool) -> Result<Vec<u32>, ModelError> {
        let hidden = self.encode(audio)?;
        let max_tokens = (audio.len() as f32 / SAMPLE_RATE as f32 * TOKENS_PER_SECOND) as usize + EXTRA_TOKENS;
        let mut cache = self.empty_cache()?;
        let mut tokens = Vec::new();
        let mut previous = START_TOKEN;
        for step in 0..max_tokens {
            let mut next = END_TOKEN;
            self.step(&hidden, &mut cache, previous, step, &mut |logits| {
                next = crate::argmax(logits) as i64;
                if speech && step == 0 && next == END_TOKEN && end_probability(logits) < SURE_NOTHING_WAS_SAID {
                    next = best_but_end(logits);
                }
            })?;
            if next == END_TOKEN {
                break;
            }
            tokens.push(next as u32);
            previous = next;
        }
        Ok(tokens)
    }

    /// The decoder's logits at the first step for `audio` (for checking a converted model).
    pub(crate) fn first_logits(&mut self, audio: &[f32]) -> Result<Vec<f32>, ModelError> {
        let hidden = self.encode(audio)?;
        let mut cache = self.empty_cache()?;
        let mut first = Vec::new();
        self.step(&hidden, &mut cache, START_TOKEN, 0, &mut |logits| first = logits.to_vec())?;
        Ok(first)
    }

    /// The encoder's hidden states for `audio`.
    fn encode(&mut self, audio: &[f32]) -> Result<DynValue, ModelError> {
        let samples = TensorRef::from_array_view(([1usize, audio.len()], audio)).map_err(fail)?;
        let mut encoded = self.encoder.run(ort::inputs!["input_values" => samples]).map_err(fail)?;
        encoded.remove("last_hidden_state").ok_or_else(|| fail("the encoder gave no hidden state"))
    }

    /// The key/value cache before the first step: every slot empty.
    fn empty_cache(&self) -> Result<Vec<DynValue>, ModelError> {
        (0..self.slots.len())
            .map(|_| {
                Tensor::<f32>::from_array((self.empty_cache_shape, Vec::<f32>::new()))
                    .map(|t| t.into_dyn())
                    .map_err(fail)
            })
            .collect()
    }

    /// One decoder step after `previous`: `on_logits` gets the next token's logits; the cache is updated
    /// (the cross-attention slots only at step 0).
    fn step(
        &mut self,
        hidden: &DynValue,
        cache: &mut [DynValue],
        previous: i64,
        step: usize,
        on_logits: &mut dyn FnMut(&[f32]),
    ) -> Result<(), ModelError> {
        let ids = [previous];
        let input_ids = TensorRef::from_array_view(([1usize, 1], &ids[..])).map_err(fail)?;
        let use_cache = [step > 0];
        let use_cache = TensorRef::from_array_view(([1usize], &use_cache[..])).map_err(fail)?;
        let mut inputs: Vec<(&str, ort::session::SessionInputValue)> = vec![
            ("input_ids", input_ids.into()),
            ("encoder_hidden_states", hidden.into()),
            ("use_cache_branch", use_cache.into()),
        ];
        for (slot, value) in self.slots.iter().zip(cache.iter()) {
            inputs.push((slot.input.as_str(), value.into()));
        }
        let mut outputs = self.decoder.run(inputs).map_err(fail)?;
        {
            let (shape, logits) = outputs["logits"].try_extract_tensor::<f32>().map_err(fail)?;
            let vocab = *shape.last().ok_or_else(|| fail("logits without a shape"))? as usize;
            on_logits(&logits[logits.len() - vocab..]);
        }
        for (slot, value) in self.slots.iter().zip(cache.iter_mut()) {
            if step == 0 || !slot.cross_attention {
                *value = outputs.remove(&slot.output).ok_or_else(|| fail(format!("no output {}", slot.output)))?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unsure_end_at_the_first_step_gives_way_to_the_best_word() {
        // Token 2 is the end; token 7 the best word after it.
        let mut logits = vec![0.0f32; 10];
        logits[END_TOKEN as usize] = 1.0;
        logits[7] = 0.5;
        assert!(end_probability(&logits) < SURE_NOTHING_WAS_SAID);
        assert_eq!(best_but_end(&logits), 7);
        logits[END_TOKEN as usize] = 12.0;
        assert!(end_probability(&logits) > SURE_NOTHING_WAS_SAID, "{}", end_probability(&logits));
    }
}
