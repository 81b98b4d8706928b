//! Chooses adapters from the agent's `provider`/`model` strings (avatar `config.llm`, `config.stt`,
//! `config.tts`), with base URLs and keys from the provider settings (`ProviderEnv`, read from the process
//! environment by the binary).
//!
//! | kind | provider | adapter |
//! |---|---|---|
//! | LLM | `openai`, `groq`, `openrouter`, `custom` | OpenAI-compatible chat completions (`CONFAB_LLM_BASE_URL` overrides the URL) |
//! | LLM | `local` or empty | `llm.model`: Qwen2.5-Coder-0.5B-Instruct (default) or SmolLM2-135M-Instruct, or a GGUF file (llama.cpp) |
//! | STT | `openai`, `custom` | OpenAI-compatible `/audio/transcriptions` (`CONFAB_STT_BASE_URL`, `OPENAI_API_KEY`/`CONFAB_STT_API_KEY`) |
//! | STT | `deepgram` | Deepgram live streaming (`DEEPGRAM_API_KEY`, `CONFAB_DEEPGRAM_URL`) |
//! | STT | `local` or empty | Moonshine Base (`moonshine-base`, the default; ONNX Runtime) or Whisper tiny.en (`whisper-tiny.en`, candle) from the models directory |
//! | TTS | `openai`, `custom` | OpenAI-compatible `/audio/speech` (`CONFAB_TTS_BASE_URL`, `OPENAI_API_KEY`/`CONFAB_TTS_API_KEY`) |
//! | TTS | `elevenlabs` | ElevenLabs `stream-input` WebSocket (`ELEVENLABS_API_KEY`, `CONFAB_ELEVENLABS_URL`) |
//! | TTS | `cartesia` | Cartesia WebSocket (`CARTESIA_API_KEY`, `CONFAB_CARTESIA_URL`) |
//! | TTS | `local` or empty | Piper en_US joe (`piper-en_US-joe-medium`, the default) from the models directory |
//! | TTS | `local` with `model_id: "espeak-ng"` | espeak-ng (`voice_id` an espeak-ng voice, default `en-us`) |

use std::path::Path;

use crate::agent_spec::{LlmConfig, SttConfig, TtsConfig};

use super::deepgram::DeepgramStt;
use super::env::ProviderEnv;
use super::llm::LanguageModel;
use super::local_llm::LocalLlm;
use super::local_stt::LocalStt;
use super::openai_audio::OpenAiAudio;
use super::openai_llm::OpenAiCompatible;
use super::piper_tts::PiperTts;
use super::tts::{EspeakVoice, SpeechSynthesizer};
use super::ws_tts::{WsTts, WsVoice};
use super::{CallPolicy, ProviderError};

fn required_key(env: &ProviderEnv, provider: &'static str, variable: &str) -> Result<String, ProviderError> {
    env.get(variable).map(str::to_string).ok_or_else(|| ProviderError::protocol(provider, format!("set {variable}")))
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
pub fn language_model(
    llm: &LlmConfig,
    models_dir: &Path,
    env: &ProviderEnv,
) -> Result<(Box<dyn LanguageModel>, String), ProviderError> {
    let provider = llm.provider.trim().to_ascii_lowercase();
    if provider.is_empty() || provider == "local" {
        let model = LocalLlm::load(models_dir, llm.model.trim())?;
        let name = model.name().to_string();
        return Ok((Box::new(model), name));
    }
    let adapter = OpenAiCompatible::from_settings(&provider, env)?;
    Ok((Box::new(adapter), llm.model.trim().to_string()))
}

/// The moderation endpoint of the `openai` provider (same base URL and key as its chat completions);
/// None for other providers, whose guardrail checks ask the language model instead.
pub fn moderation_endpoint(
    llm: &LlmConfig,
    env: &ProviderEnv,
) -> Option<crate::actions::moderation::ModerationEndpoint> {
    let provider = llm.provider.trim().to_ascii_lowercase();
    (provider == "openai").then(|| OpenAiCompatible::from_settings(&provider, env).ok()).flatten().map(|adapter| {
        crate::actions::moderation::ModerationEndpoint { base_url: adapter.base_url, api_key: adapter.api_key }
    })
}

/// A speech recognizer for whole utterances (a clone shares the model or the endpoint).
#[derive(Clone)]
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
fn openai_audio_endpoint(
    kind: &'static str,
    provider: &str,
    env: &ProviderEnv,
) -> Result<(String, Option<String>), ProviderError> {
    let upper = kind.to_ascii_uppercase();
    let setting = |name: &str| env.get(name).map(str::to_string);
    let (default_url, key) = match provider {
        "openai" => ("https://api.openai.com/v1", setting("OPENAI_API_KEY")),
        "custom" => ("", setting(&format!("CONFAB_{upper}_API_KEY"))),
        other => {
            return Err(ProviderError::protocol(kind, format!("the {kind} provider \"{other}\" is not in this build")));
        }
    };
    let base = setting(&format!("CONFAB_{upper}_BASE_URL")).unwrap_or_else(|| default_url.to_string());
    if base.is_empty() {
        return Err(ProviderError::protocol(kind, format!("set CONFAB_{upper}_BASE_URL for the custom provider")));
    }
    Ok((base, key))
}

/// The speech recognizer, or None when none is configured.
pub fn recognizer(stt: &SttConfig, models_dir: &Path, env: &ProviderEnv) -> Result<Option<Recognizer>, ProviderError> {
    let provider = stt.provider.trim().to_ascii_lowercase();
    let model = stt.model.trim();
    match provider.as_str() {
        "" | "local" => Ok(Some(Recognizer::Local(LocalStt::load(model, models_dir)?))),
        "deepgram" => {
            let model = or_default(model, "nova-3").to_string();
            let mut deepgram = DeepgramStt::new(required_key(env, "deepgram", "DEEPGRAM_API_KEY")?, model);
            if let Some(url) = env.get("CONFAB_DEEPGRAM_URL") {
                deepgram.url = url.to_string();
            }
            Ok(Some(Recognizer::Deepgram(deepgram)))
        }
        other => {
            let (base, key) = openai_audio_endpoint("stt", other, env)?;
            let model = or_default(model, "whisper-1");
            Ok(Some(Recognizer::OpenAi(OpenAiAudio::new(base, key, model, "", CallPolicy::default()))))
        }
    }
}

/// The speech synthesizer.
pub fn synthesizer(
    tts: &TtsConfig,
    models_dir: &Path,
    env: &ProviderEnv,
) -> Result<Box<dyn SpeechSynthesizer>, ProviderError> {
    let provider = tts.provider.trim().to_ascii_lowercase();
    let voice = tts.voice_id.trim();
    let model = tts.model_id.trim();
    match provider.as_str() {
        "" | "local" if model == "espeak-ng" => {
            Ok(Box::new(EspeakVoice { voice: or_default(voice, "en-us").to_string(), ..EspeakVoice::default() }))
        }
        "" | "local" => Ok(Box::new(PiperTts::load(models_dir)?)),
        "elevenlabs" => {
            let key = required_key(env, "elevenlabs", "ELEVENLABS_API_KEY")?;
            let mut tts = WsTts::elevenlabs(key, voice.to_string(), or_default(model, "eleven_flash_v2_5").to_string());
            override_url(&mut tts, env.get("CONFAB_ELEVENLABS_URL"));
            Ok(Box::new(tts))
        }
        "cartesia" => {
            let key = required_key(env, "cartesia", "CARTESIA_API_KEY")?;
            let mut tts = WsTts::cartesia(key, voice.to_string(), or_default(model, "sonic-2").to_string());
            override_url(&mut tts, env.get("CONFAB_CARTESIA_URL"));
            Ok(Box::new(tts))
        }
        other => {
            let (base, key) = openai_audio_endpoint("tts", other, env)?;
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

fn override_url(tts: &mut WsTts, url: Option<&str>) {
    if let Some(url) = url {
        match &mut tts.voice {
            WsVoice::ElevenLabs { base_url, .. } | WsVoice::Cartesia { base_url, .. } => *base_url = url.to_string(),
        }
    }
}
