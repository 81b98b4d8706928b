//! Chooses adapters from the agent's `provider`/`model` strings (avatar `config.llm`, `config.stt`,
//! `config.tts`), with base URLs and keys from the environment.
//!
//! | kind | provider | adapter |
//! |---|---|---|
//! | LLM | `openai`, `groq`, `openrouter`, `custom` | OpenAI-compatible chat completions (`CONFAB_LLM_BASE_URL` overrides the URL) |
//! | LLM | `local` or empty | `llm.model`: Qwen2.5-Coder-0.5B-Instruct (default) or SmolLM2-135M-Instruct (GGUF, candle) |
//! | STT | `openai`, `custom` | OpenAI-compatible `/audio/transcriptions` (`CONFAB_STT_BASE_URL`, `OPENAI_API_KEY`/`CONFAB_STT_API_KEY`) |
//! | STT | `deepgram` | Deepgram live streaming (`DEEPGRAM_API_KEY`, `CONFAB_DEEPGRAM_URL`) |
//! | STT | `local` or empty | Moonshine Base (`moonshine-base`, the default; ONNX Runtime) or Whisper tiny.en (`whisper-tiny.en`, candle) from the models directory |
//! | TTS | `openai`, `custom` | OpenAI-compatible `/audio/speech` (`CONFAB_TTS_BASE_URL`, `OPENAI_API_KEY`/`CONFAB_TTS_API_KEY`) |
//! | TTS | `elevenlabs` | ElevenLabs `stream-input` WebSocket (`ELEVENLABS_API_KEY`, `CONFAB_ELEVENLABS_URL`) |
//! | TTS | `cartesia` | Cartesia WebSocket (`CARTESIA_API_KEY`, `CONFAB_CARTESIA_URL`) |
//! | TTS | `local` or empty | Piper en_US joe (`piper-en_US-joe-medium`, the default) from the models directory |
//! | TTS | `local` with `model_id: "espeak-ng"` | espeak-ng (`voice_id` an espeak-ng voice, default `en-us`) |

use std::path::Path;

use serde_json::Value;

use super::deepgram::DeepgramStt;
use super::llm::LanguageModel;
use super::local_llm::LocalLlm;
use super::local_stt::LocalStt;
use super::openai_audio::OpenAiAudio;
use super::openai_llm::OpenAiCompatible;
use super::piper_tts::PiperTts;
use super::tts::{EspeakVoice, SpeechSynthesizer};
use super::ws_tts::{WsTts, WsVoice};
use super::{CallPolicy, ProviderError};

fn field<'a>(config: &'a Value, name: &str) -> &'a str {
    config[name].as_str().unwrap_or("").trim()
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

fn required_key(provider: &'static str, variable: &str) -> Result<String, ProviderError> {
    env(variable).ok_or_else(|| ProviderError::protocol(provider, format!("set {variable}")))
}

fn or_default<'a>(value: &'a str, default: &'a str) -> &'a str {
    if value.is_empty() { default } else { value }
}

/// Loads the local models an agent uses unless told otherwise (speech-to-text, language model, one Piper
/// voice, which speaks a word to warm up) into the process-wide caches, so the first call does not wait
/// for them (~3 s). Blocking; returns what failed, by model, for the log (a call that needs a model that
/// failed here loads it again and reports its own error).
pub fn preload_local_models(models_dir: &Path) -> Vec<(&'static str, ProviderError)> {
    let mut failed = Vec::new();
    if let Err(err) = LocalStt::load("", models_dir) {
        failed.push(("speech-to-text", err));
    }
    if let Err(err) = LocalLlm::load(models_dir, "") {
        failed.push(("language model", err));
    }
    if let Err(err) = PiperTts::load(models_dir).and_then(|voice| voice.render("Hello.")) {
        failed.push(("voice", err));
    }
    failed
}

/// The language model and its model name.
pub fn language_model(llm: &Value, models_dir: &Path) -> Result<(Box<dyn LanguageModel>, String), ProviderError> {
    let provider = field(llm, "provider").to_ascii_lowercase();
    if provider.is_empty() || provider == "local" {
        let model = LocalLlm::load(models_dir, field(llm, "model"))?;
        let name = model.name().to_string();
        return Ok((Box::new(model), name));
    }
    let adapter = OpenAiCompatible::from_env(&provider)?;
    Ok((Box::new(adapter), field(llm, "model").to_string()))
}

/// The moderation endpoint of the `openai` provider (same base URL and key as its chat completions);
/// None for other providers, whose guardrail checks ask the language model instead.
pub fn moderation_endpoint(llm: &Value) -> Option<crate::actions::moderation::ModerationEndpoint> {
    let provider = field(llm, "provider").to_ascii_lowercase();
    (provider == "openai").then(|| OpenAiCompatible::from_env(&provider).ok()).flatten().map(|adapter| {
        crate::actions::moderation::ModerationEndpoint { base_url: adapter.base_url, api_key: adapter.api_key }
    })
}

/// A speech recognizer for whole utterances.
pub enum Recognizer {
    Local(LocalStt),
    OpenAi(OpenAiAudio),
    Deepgram(DeepgramStt),
}

impl Recognizer {
    pub async fn transcribe(&self, audio: &[f32]) -> Result<String, ProviderError> {
        match self {
            Recognizer::Local(stt) => stt.transcribe(audio).await,
            Recognizer::OpenAi(stt) => stt.transcribe(audio).await,
            Recognizer::Deepgram(stt) => stt.transcribe(audio).await,
        }
    }
}

/// Base URL and key of an OpenAI-compatible speech endpoint (`openai` or `custom`).
fn openai_audio_endpoint(kind: &'static str, provider: &str) -> Result<(String, Option<String>), ProviderError> {
    let upper = kind.to_ascii_uppercase();
    let (default_url, key) = match provider {
        "openai" => ("https://api.openai.com/v1", env("OPENAI_API_KEY")),
        "custom" => ("", env(&format!("CONFAB_{upper}_API_KEY"))),
        other => {
            return Err(ProviderError::protocol(kind, format!("the {kind} provider \"{other}\" is not in this build")));
        }
    };
    let base = env(&format!("CONFAB_{upper}_BASE_URL")).unwrap_or_else(|| default_url.to_string());
    if base.is_empty() {
        return Err(ProviderError::protocol(kind, format!("set CONFAB_{upper}_BASE_URL for the custom provider")));
    }
    Ok((base, key))
}

/// The speech recognizer, or None when none is configured.
pub fn recognizer(stt: &Value, models_dir: &Path) -> Result<Option<Recognizer>, ProviderError> {
    let provider = field(stt, "provider").to_ascii_lowercase();
    match provider.as_str() {
        "" | "local" => Ok(Some(Recognizer::Local(LocalStt::load(field(stt, "model"), models_dir)?))),
        "deepgram" => {
            let model = or_default(field(stt, "model"), "nova-3").to_string();
            let mut deepgram = DeepgramStt::new(required_key("deepgram", "DEEPGRAM_API_KEY")?, model);
            if let Some(url) = env("CONFAB_DEEPGRAM_URL") {
                deepgram.url = url;
            }
            Ok(Some(Recognizer::Deepgram(deepgram)))
        }
        other => {
            let (base, key) = openai_audio_endpoint("stt", other)?;
            let model = or_default(field(stt, "model"), "whisper-1");
            Ok(Some(Recognizer::OpenAi(OpenAiAudio::new(base, key, model, "", CallPolicy::default()))))
        }
    }
}

/// The speech synthesizer.
pub fn synthesizer(tts: &Value, models_dir: &Path) -> Result<Box<dyn SpeechSynthesizer>, ProviderError> {
    let provider = field(tts, "provider").to_ascii_lowercase();
    let voice = field(tts, "voice_id");
    let model = field(tts, "model_id");
    match provider.as_str() {
        "" | "local" if model == "espeak-ng" => {
            Ok(Box::new(EspeakVoice { voice: or_default(voice, "en-us").to_string(), ..EspeakVoice::default() }))
        }
        "" | "local" => Ok(Box::new(PiperTts::load(models_dir)?)),
        "elevenlabs" => {
            let key = required_key("elevenlabs", "ELEVENLABS_API_KEY")?;
            let mut tts = WsTts::elevenlabs(key, voice.to_string(), or_default(model, "eleven_flash_v2_5").to_string());
            override_url(&mut tts, "CONFAB_ELEVENLABS_URL");
            Ok(Box::new(tts))
        }
        "cartesia" => {
            let key = required_key("cartesia", "CARTESIA_API_KEY")?;
            let mut tts = WsTts::cartesia(key, voice.to_string(), or_default(model, "sonic-2").to_string());
            override_url(&mut tts, "CONFAB_CARTESIA_URL");
            Ok(Box::new(tts))
        }
        other => {
            let (base, key) = openai_audio_endpoint("tts", other)?;
            let audio = OpenAiAudio::new(
                base,
                key,
                or_default(model, "tts-1"),
                or_default(voice, "alloy"),
                CallPolicy::default(),
            );
            Ok(Box::new(audio))
        }
    }
}

fn override_url(tts: &mut WsTts, variable: &str) {
    if let Some(url) = env(variable) {
        match &mut tts.voice {
            WsVoice::ElevenLabs { base_url, .. } | WsVoice::Cartesia { base_url, .. } => *base_url = url,
        }
    }
}
