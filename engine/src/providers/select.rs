//! Chooses adapters from the agent's `provider`/`model` strings (avatar `config.llm`, `config.stt`,
//! `config.tts`), with base URLs and keys from the environment.
//!
//! | kind | provider | adapter |
//! |---|---|---|
//! | LLM | `openai`, `groq`, `openrouter`, `custom` | OpenAI-compatible chat completions (`CONFAB_LLM_BASE_URL` overrides the URL) |
//! | LLM | `local` or empty | the embedded SmolLM2 — not in this build: the agent does not answer |
//! | STT | `openai`, `custom` | OpenAI-compatible `/audio/transcriptions` (`CONFAB_STT_BASE_URL`, `OPENAI_API_KEY`/`CONFAB_STT_API_KEY`) |
//! | STT | `local` or empty | the embedded Whisper — not in this build: committed text is empty |
//! | TTS | `openai`, `custom` | OpenAI-compatible `/audio/speech` (`CONFAB_TTS_BASE_URL`, `OPENAI_API_KEY`/`CONFAB_TTS_API_KEY`) |
//! | TTS | `local` or empty | espeak-ng (`voice_id` an espeak-ng voice, default `en-us`); the Piper voice is not in this build |

use serde_json::Value;

use super::llm::LanguageModel;
use super::openai_audio::OpenAiAudio;
use super::openai_llm::OpenAiCompatible;
use super::tts::{EspeakVoice, SpeechSynthesizer};
use super::{CallPolicy, ProviderError};

fn field<'a>(config: &'a Value, name: &str) -> &'a str {
    config[name].as_str().unwrap_or("").trim()
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

/// The language model, or None for the local model this build does not have.
pub fn language_model(
    llm: &Value,
) -> Result<Option<(Box<dyn LanguageModel>, String)>, ProviderError> {
    let provider = field(llm, "provider").to_ascii_lowercase();
    if provider.is_empty() || provider == "local" {
        return Ok(None);
    }
    let adapter = OpenAiCompatible::from_env(&provider)?;
    Ok(Some((Box::new(adapter), field(llm, "model").to_string())))
}

/// The speech recognizer, or None for the local model this build does not have.
pub fn recognizer(stt: &Value) -> Result<Option<OpenAiAudio>, ProviderError> {
    let provider = field(stt, "provider").to_ascii_lowercase();
    let (default_url, key) = match provider.as_str() {
        "" | "local" => return Ok(None),
        "openai" => ("https://api.openai.com/v1", env("OPENAI_API_KEY")),
        "custom" => ("", env("CONFAB_STT_API_KEY")),
        other => {
            return Err(ProviderError::protocol(
                "stt",
                format!("the STT provider \"{other}\" is not in this build"),
            ));
        }
    };
    let base = env("CONFAB_STT_BASE_URL").unwrap_or_else(|| default_url.to_string());
    if base.is_empty() {
        return Err(ProviderError::protocol(
            "stt",
            "set CONFAB_STT_BASE_URL for the custom provider",
        ));
    }
    let model = match field(stt, "model") {
        "" => "whisper-1",
        model => model,
    };
    Ok(Some(OpenAiAudio::new(
        base,
        key,
        model,
        "",
        CallPolicy::default(),
    )))
}

/// The speech synthesizer.
pub fn synthesizer(tts: &Value) -> Result<Box<dyn SpeechSynthesizer>, ProviderError> {
    let provider = field(tts, "provider").to_ascii_lowercase();
    let voice = field(tts, "voice_id");
    let (default_url, key) = match provider.as_str() {
        "" | "local" => {
            let voice = if voice.is_empty() {
                "en-us".to_string()
            } else {
                voice.to_string()
            };
            return Ok(Box::new(EspeakVoice {
                voice,
                ..EspeakVoice::default()
            }));
        }
        "openai" => ("https://api.openai.com/v1", env("OPENAI_API_KEY")),
        "custom" => ("", env("CONFAB_TTS_API_KEY")),
        other => {
            return Err(ProviderError::protocol(
                "tts",
                format!("the TTS provider \"{other}\" is not in this build"),
            ));
        }
    };
    let base = env("CONFAB_TTS_BASE_URL").unwrap_or_else(|| default_url.to_string());
    if base.is_empty() {
        return Err(ProviderError::protocol(
            "tts",
            "set CONFAB_TTS_BASE_URL for the custom provider",
        ));
    }
    let model = match field(tts, "model_id") {
        "" => "tts-1",
        model => model,
    };
    let voice = if voice.is_empty() { "alloy" } else { voice };
    Ok(Box::new(OpenAiAudio::new(
        base,
        key,
        model,
        voice,
        CallPolicy::default(),
    )))
}
