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
use std::sync::Arc;
use std::time::Duration;

use crate::agent_spec::{LlmConfig, SttConfig, TtsConfig};
use crate::pipeline_config::{
    LLM_FIRST_RESPONSE_TIMEOUT, STT_FIRST_RESPONSE_TIMEOUT, TTS_FIRST_RESPONSE_TIMEOUT, first_response,
};

use super::chain::ServedBy;
use super::deepgram::DeepgramStt;
use super::env::{NamedEndpoint, ProviderEnv};
use super::health::{FailureReason, ProviderKey, process_health};
use super::llm::LanguageModel;
use super::llm_chain::{LlmChain, LlmLink};
use super::local_llm::LocalLlm;
use super::local_stt::LocalStt;
use super::openai_audio::OpenAiAudio;
use super::openai_llm::{OpenAiCompatible, provider_defaults};
use super::piper_tts::PiperTts;
use super::stt_chain::{SttChain, SttLink};
use super::tts::{EspeakVoice, SpeechSynthesizer};
use super::tts_chain::{TtsChain, TtsLink};
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

/// The language model and its model name: the primary (`llm`) and its fallbacks as one chain
/// (`llm_chain`), each with its deadline, sharing the process's provider health.
pub fn language_model(
    llm: &LlmConfig,
    models_dir: &Path,
    env: &ProviderEnv,
) -> Result<(Box<dyn LanguageModel>, String), ProviderError> {
    let configs: Vec<&LlmConfig> = std::iter::once(llm).chain(&llm.fallbacks).collect();
    let unbuilt =
        |config: &LlmConfig| provider_key("llm", &config.provider, config.endpoint.as_deref(), config.model.trim());
    let links = build_links(&configs, unbuilt, |position, config| {
        let (deadline, policy) =
            link_policy(config.first_response_timeout, LLM_FIRST_RESPONSE_TIMEOUT, position, &configs);
        let (model, model_name) = one_language_model(config, models_dir, env, policy)?;
        let key = provider_key("llm", &config.provider, config.endpoint.as_deref(), &model_name);
        Ok(LlmLink { model: Arc::from(model), model_name, key, first_response: deadline })
    })?;
    let name = links[0].model_name.clone();
    let hedge_after = hedge(llm.hedge_after);
    Ok((Box::new(LlmChain::new(links, process_health(), hedge_after)), name))
}

/// One language model of a chain, and its model name.
fn one_language_model(
    llm: &LlmConfig,
    models_dir: &Path,
    env: &ProviderEnv,
    policy: CallPolicy,
) -> Result<(Box<dyn LanguageModel>, String), ProviderError> {
    let provider = llm.provider.trim().to_ascii_lowercase();
    if provider.is_empty() || provider == "local" {
        let model = LocalLlm::load(models_dir, llm.model.trim())?;
        let name = model.name().to_string();
        return Ok((Box::new(model), name));
    }
    let adapter = match &llm.endpoint {
        // A named endpoint has its own URL and key: the provider's settings are not needed.
        Some(name) => {
            let (provider, _, _) = provider_defaults(&provider)
                .ok_or_else(|| ProviderError::protocol("llm", format!("unknown LLM provider \"{provider}\"")))?;
            let endpoint = named_endpoint(env, "llm", name)?;
            OpenAiCompatible::new(provider, endpoint.url.clone(), endpoint.api_key.clone(), policy)
        }
        None => {
            let adapter = OpenAiCompatible::from_settings(&provider, env)?;
            OpenAiCompatible::new(adapter.provider, adapter.base_url, adapter.api_key, policy)
        }
    };
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
    /// A primary and its fallbacks (`stt_chain`).
    Chain(Arc<SttChain>),
}

impl Recognizer {
    pub async fn transcribe(&self, audio: &[f32]) -> Result<String, ProviderError> {
        match self {
            Recognizer::Local(stt) => stt.transcribe(audio).await,
            Recognizer::OpenAi(stt) => stt.transcribe(audio).await,
            Recognizer::Deepgram(stt) => stt.transcribe(audio).await,
            Recognizer::Chain(chain) => chain.transcribe(audio).await.0,
        }
    }

    /// The transcript, and which recognizer of a chain gave it after which failed (None for one alone).
    pub async fn transcribe_served(&self, audio: &[f32]) -> (Result<String, ProviderError>, Option<ServedBy>) {
        match self {
            Recognizer::Chain(chain) => {
                let (result, served) = chain.transcribe(audio).await;
                (result, Some(served))
            }
            other => (Box::pin(other.transcribe(audio)).await, None),
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

/// The speech recognizer: the primary (`stt`) alone, or with its fallbacks as a chain (`stt_chain`),
/// each with its deadline, sharing the process's provider health.
pub fn recognizer(stt: &SttConfig, models_dir: &Path, env: &ProviderEnv) -> Result<Option<Recognizer>, ProviderError> {
    let configs: Vec<&SttConfig> = std::iter::once(stt).chain(&stt.fallbacks).collect();
    let unbuilt =
        |config: &SttConfig| provider_key("stt", &config.provider, config.endpoint.as_deref(), config.model.trim());
    let links = build_links(&configs, unbuilt, |position, config| {
        let (deadline, policy) =
            link_policy(config.first_response_timeout, STT_FIRST_RESPONSE_TIMEOUT, position, &configs);
        let recognizer = one_recognizer(config, models_dir, env, policy)?;
        let model = match (config.model.trim(), &recognizer) {
            ("", Recognizer::Local(_)) => "default",
            (model, _) => model,
        };
        let key = provider_key("stt", &config.provider, config.endpoint.as_deref(), model);
        Ok(SttLink { recognizer, key, first_response: deadline })
    })?;
    let hedge_after = hedge(stt.hedge_after);
    Ok(Some(Recognizer::Chain(Arc::new(SttChain { links, health: process_health(), hedge_after }))))
}

/// One recognizer of a chain.
fn one_recognizer(
    stt: &SttConfig,
    models_dir: &Path,
    env: &ProviderEnv,
    policy: CallPolicy,
) -> Result<Recognizer, ProviderError> {
    let provider = stt.provider.trim().to_ascii_lowercase();
    let model = stt.model.trim();
    let endpoint = stt.endpoint.as_deref().map(|name| named_endpoint(env, "stt", name)).transpose()?;
    match provider.as_str() {
        "" | "local" => Ok(Recognizer::Local(LocalStt::load(model, models_dir)?)),
        "deepgram" => {
            let model = or_default(model, "nova-3").to_string();
            let key = match endpoint.and_then(|e| e.api_key.clone()) {
                Some(key) => key,
                None => required_key(env, "deepgram", "DEEPGRAM_API_KEY")?,
            };
            let mut deepgram = DeepgramStt::new(key, model);
            deepgram.policy = policy;
            if let Some(url) = endpoint.map(|e| e.url.as_str()).or(env.get("CONFAB_DEEPGRAM_URL")) {
                deepgram.url = url.to_string();
            }
            Ok(Recognizer::Deepgram(deepgram))
        }
        other => {
            let (base, key) = match endpoint {
                Some(endpoint) => (endpoint.url.clone(), endpoint.api_key.clone()),
                None => openai_audio_endpoint("stt", other, env)?,
            };
            let model = or_default(model, "whisper-1");
            Ok(Recognizer::OpenAi(OpenAiAudio::new(base, key, model, "", policy)))
        }
    }
}

/// The speech synthesizer: the primary (`tts`) and its fallbacks as one chain (`tts_chain`), each with
/// its deadline, sharing the process's provider health.
pub fn synthesizer(
    tts: &TtsConfig,
    models_dir: &Path,
    env: &ProviderEnv,
) -> Result<Box<dyn SpeechSynthesizer>, ProviderError> {
    let configs: Vec<&TtsConfig> = std::iter::once(tts).chain(&tts.fallbacks).collect();
    let key = |config: &TtsConfig| {
        let model = match (config.model_id.trim(), config.voice_id.trim()) {
            ("", "") => "default".to_string(),
            ("", voice) => voice.to_string(),
            (model, "") => model.to_string(),
            (model, voice) => format!("{model}/{voice}"),
        };
        provider_key("tts", &config.provider, config.endpoint.as_deref(), &model)
    };
    let links = build_links(&configs, key, |position, config| {
        let (deadline, policy) =
            link_policy(config.first_response_timeout, TTS_FIRST_RESPONSE_TIMEOUT, position, &configs);
        let voice = one_synthesizer(config, models_dir, env, policy)?;
        Ok(TtsLink { voice: Arc::from(voice), key: key(config), first_response: deadline })
    })?;
    Ok(Box::new(TtsChain::new(links, process_health(), hedge(tts.hedge_after))))
}

/// Builds each link of a chain (`build(position, config)`), in order. A link that cannot be built — a key
/// not set, an endpoint the process was not started with, a local model that does not load — is left
/// out when another can be built: the call goes on with the others, the log says why, and `/metrics`
/// counts it as a failure of that provider (named by `key`). When none can be built, the primary's error.
fn build_links<C, L>(
    configs: &[&C],
    key: impl Fn(&C) -> ProviderKey,
    mut build: impl FnMut(usize, &C) -> Result<L, ProviderError>,
) -> Result<Vec<L>, ProviderError> {
    let mut links = Vec::with_capacity(configs.len());
    let mut errors = Vec::new();
    for (position, config) in configs.iter().enumerate() {
        match build(position, config) {
            Ok(link) => links.push(link),
            Err(error) => errors.push((key(config), error)),
        }
    }
    if links.is_empty() {
        return Err(errors.into_iter().next().map(|(_, error)| error).expect("a chain has a primary"));
    }
    for (key, error) in errors {
        tracing::warn!(stage = key.stage, provider = %key.provider, %error, "provider left out of the chain: it cannot be used");
        process_health().failed(&key, FailureReason::Protocol, std::time::Instant::now());
    }
    Ok(links)
}

/// The deadline of the link at `position` of a chain of `links` (its `first_response_timeout`, else the
/// stage's `default`), and its adapter's policy: retries within the deadline, a 429 passed on when a
/// link follows.
fn link_policy<T>(configured: Option<f64>, default: f64, position: usize, links: &[T]) -> (Duration, CallPolicy) {
    let deadline = first_response(configured, default);
    (deadline, CallPolicy::in_chain(deadline, position + 1 < links.len()))
}

/// A stage's `hedge_after`, when it is a duration.
fn hedge(seconds: Option<f64>) -> Option<Duration> {
    seconds.filter(|s| s.is_finite() && *s > 0.0 && *s <= 3600.0).map(Duration::from_secs_f64)
}

/// How `/metrics` and the health table name a provider of `stage`: its name (`local` when empty), the
/// endpoint it is sent to, and its model (`custom@backup:gpt-4o-mini`, `local:default`).
fn provider_key(stage: &'static str, provider: &str, endpoint: Option<&str>, model: &str) -> ProviderKey {
    let provider = match provider.trim() {
        "" => "local".to_string(),
        other => other.to_ascii_lowercase(),
    };
    let provider = match endpoint {
        Some(endpoint) => format!("{provider}@{endpoint}:{model}"),
        None => format!("{provider}:{model}"),
    };
    ProviderKey { stage, provider }
}

/// The endpoint `name` of `stage`, which the operator must have named.
fn named_endpoint<'a>(
    env: &'a ProviderEnv,
    stage: &'static str,
    name: &str,
) -> Result<&'a NamedEndpoint, ProviderError> {
    env.endpoint(stage, name).ok_or_else(|| {
        ProviderError::protocol(
            stage,
            format!("no {stage} endpoint \"{name}\" (start the server with --{stage}-endpoint {name}=URL)"),
        )
    })
}

/// One voice of a chain.
fn one_synthesizer(
    tts: &TtsConfig,
    models_dir: &Path,
    env: &ProviderEnv,
    policy: CallPolicy,
) -> Result<Box<dyn SpeechSynthesizer>, ProviderError> {
    let provider = tts.provider.trim().to_ascii_lowercase();
    let voice = tts.voice_id.trim();
    let model = tts.model_id.trim();
    let endpoint = tts.endpoint.as_deref().map(|name| named_endpoint(env, "tts", name)).transpose()?;
    match provider.as_str() {
        "" | "local" if model == "espeak-ng" => {
            Ok(Box::new(EspeakVoice { voice: or_default(voice, "en-us").to_string(), ..EspeakVoice::default() }))
        }
        "" | "local" => Ok(Box::new(PiperTts::load(models_dir)?)),
        "elevenlabs" | "cartesia" => {
            let (key_variable, url_variable) = match provider.as_str() {
                "elevenlabs" => ("ELEVENLABS_API_KEY", "CONFAB_ELEVENLABS_URL"),
                _ => ("CARTESIA_API_KEY", "CONFAB_CARTESIA_URL"),
            };
            let key = match endpoint.and_then(|e| e.api_key.clone()) {
                Some(key) => key,
                None => {
                    required_key(env, if provider == "elevenlabs" { "elevenlabs" } else { "cartesia" }, key_variable)?
                }
            };
            let mut tts = if provider == "elevenlabs" {
                WsTts::elevenlabs(key, voice.to_string(), or_default(model, "eleven_flash_v2_5").to_string())
            } else {
                WsTts::cartesia(key, voice.to_string(), or_default(model, "sonic-2").to_string())
            };
            tts.policy = policy;
            override_url(&mut tts, endpoint.map(|e| e.url.as_str()).or(env.get(url_variable)));
            Ok(Box::new(tts))
        }
        other => {
            let (base, key) = match endpoint {
                Some(endpoint) => (endpoint.url.clone(), endpoint.api_key.clone()),
                None => openai_audio_endpoint("tts", other, env)?,
            };
            let audio = OpenAiAudio::new(base, key, or_default(model, "tts-1"), or_default(voice, "alloy"), policy);
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
