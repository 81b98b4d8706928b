//! The API's rules for the pipeline configuration an agent or template carries (`config.llm`,
//! `config.stt`, `config.tts` of each avatar: `PipelineConfig`, the engine's one typed configuration,
//! re-exported here): the providers and presets allowed, the defaults filled in (`PipelineRules`), and
//! the attachment id lists. Providers left empty mean `local`, the embedded offline models.

use serde::{Deserialize, Serialize};
#[cfg(feature = "openapi")]
use utoipa::ToSchema;

pub use confab_engine::agent_spec::{LlmConfig, PipelineConfig, SttConfig, TtsConfig, nullable};

use crate::Db;
use crate::collection::{GUARDRAILS, KNOWLEDGE_BASES, MCP_SERVERS, TOOLS};
use crate::error::{ApiError, ApiResult};
use crate::validate;

mod provider_chain;
pub use provider_chain::{MAX_FALLBACKS, MAX_STAGE_SECONDS, endpoint_name_ok};

pub const LLM_PROVIDERS: &[&str] = &["local", "openai", "groq", "openrouter", "custom"];
pub const STT_PROVIDERS: &[&str] = &["local", "deepgram", "openai", "custom"];
pub const TTS_PROVIDERS: &[&str] = &["local", "elevenlabs", "cartesia", "openai", "custom"];
pub const TURN_HANDLING: &[&str] = &["proactive", "balanced", "deliberate"];
pub const INTERRUPTABILITY: &[&str] = &["low", "medium", "high"];
/// `stt.backchannels`: what speech over the agent made only of backchannels does.
pub const BACKCHANNELS: &[&str] = &["ignore", "interrupt"];
/// `stt.noise_suppression`: when steady noise is taken out of the user's audio.
pub const NOISE_SUPPRESSION: &[&str] = &confab_engine::audio::denoise::NoiseSuppression::NAMES;
/// `stt.other_voices`: whether voices well below the user's are the user's.
pub const OTHER_VOICES: &[&str] = &confab_engine::core::other_voices::OtherVoices::NAMES;

/// The embedded language models of the `local` provider, the embedded default first (`confab models fetch`
/// provides them); `llm.model` may also name a GGUF file (checked by `confab_http` against the models
/// directory when the agent is created).
pub const LOCAL_LLM_MODELS: &[&str] = &confab_engine::providers::local_llm::MODELS;
/// The speech-to-text models the `local` provider runs, the default first (`confab models fetch` provides them).
pub const LOCAL_STT_MODELS: &[&str] = confab_engine::providers::local_stt::MODELS;
pub const DEFAULT_STT_MODEL: &str = LOCAL_STT_MODELS[0];
pub const DEFAULT_TTS_MODEL: &str = "piper-en_US-joe-medium";
/// Longest endpointing delay accepted, in seconds.
pub const MAX_ENDPOINTING_DELAY_SECONDS: f64 = 30.0;

fn provider(field: &str, value: &mut String, allowed: &[&str]) -> ApiResult<()> {
    *value = value.trim().to_ascii_lowercase();
    if value.is_empty() {
        *value = "local".to_string();
    }
    validate::one_of(field, value, allowed)
}

fn default_model(value: &mut String, provider: &str, local_default: &str) {
    if value.trim().is_empty() && provider == "local" {
        *value = local_default.to_string();
    }
}

fn delay(field: &str, value: Option<f64>) -> ApiResult<()> {
    match value {
        Some(seconds) if !(seconds.is_finite() && (0.0..=MAX_ENDPOINTING_DELAY_SECONDS).contains(&seconds)) => {
            Err(ApiError::bad_request(format!(
                "Invalid request body: {field} must be between 0 and {MAX_ENDPOINTING_DELAY_SECONDS} seconds"
            )))
        }
        _ => Ok(()),
    }
}

/// The API's rules for an avatar's pipeline: what a request body may carry, and the defaults filled in.
pub trait PipelineRules {
    /// Validates every field and fills the defaults (`local` providers and their models).
    fn normalize(&mut self, prefix: &str) -> ApiResult<()>;
    /// A `local` language model that names a GGUF file must be one Confab can run, inside the models
    /// directory or a directory the operator allows (its header is read): refused now, with the reason,
    /// rather than at a call.
    fn check_local_model(&self, prefix: &str, models_dir: &std::path::Path) -> ApiResult<()>;
}

impl PipelineRules for PipelineConfig {
    fn normalize(&mut self, prefix: &str) -> ApiResult<()> {
        normalize_llm(&format!("{prefix}llm."), &mut self.llm)?;
        normalize_stt(&format!("{prefix}stt."), &mut self.stt)?;
        normalize_tts(&format!("{prefix}tts."), &mut self.tts)?;
        for (index, entry) in self.llm.fallbacks.iter_mut().enumerate() {
            normalize_llm(&format!("{prefix}llm.fallbacks[{index}]."), entry)?;
        }
        for (index, entry) in self.stt.fallbacks.iter_mut().enumerate() {
            normalize_stt(&format!("{prefix}stt.fallbacks[{index}]."), entry)?;
        }
        for (index, entry) in self.tts.fallbacks.iter_mut().enumerate() {
            normalize_tts(&format!("{prefix}tts.fallbacks[{index}]."), entry)?;
        }
        delay(&format!("{prefix}stt.min_endpointing_delay"), self.stt.min_endpointing_delay)?;
        delay(&format!("{prefix}stt.max_endpointing_delay"), self.stt.max_endpointing_delay)?;
        if let (Some(min), Some(max)) = (self.stt.min_endpointing_delay, self.stt.max_endpointing_delay)
            && max < min
        {
            return Err(ApiError::bad_request(format!(
                "Invalid request body: {prefix}stt.max_endpointing_delay must not be less than min_endpointing_delay"
            )));
        }
        if let Some(preset) = &self.stt.turn_handling {
            validate::one_of(&format!("{prefix}stt.turn_handling"), preset, TURN_HANDLING)?;
        }
        if let Some(preset) = &self.stt.interruptability {
            validate::one_of(&format!("{prefix}stt.interruptability"), preset, INTERRUPTABILITY)?;
        }
        if let Some(rule) = &self.stt.backchannels {
            validate::one_of(&format!("{prefix}stt.backchannels"), rule, BACKCHANNELS)?;
        }
        if let Some(mode) = &self.stt.noise_suppression {
            validate::one_of(&format!("{prefix}stt.noise_suppression"), mode, NOISE_SUPPRESSION)?;
        }
        if let Some(rule) = &self.stt.other_voices {
            validate::one_of(&format!("{prefix}stt.other_voices"), rule, OTHER_VOICES)?;
        }
        provider_chain::check(prefix, self)
    }

    fn check_local_model(&self, prefix: &str, models_dir: &std::path::Path) -> ApiResult<()> {
        let entries = std::iter::once((format!("{prefix}llm.model"), &self.llm)).chain(
            self.llm
                .fallbacks
                .iter()
                .enumerate()
                .map(|(i, entry)| (format!("{prefix}llm.fallbacks[{i}].model"), entry)),
        );
        for (field, llm) in entries.filter(|(_, llm)| llm.provider == "local") {
            confab_engine::providers::local_llm::check(models_dir, &llm.model)
                .map_err(|why| ApiError::bad_request(format!("Invalid request body: {field}: {why}")))?;
        }
        Ok(())
    }
}

/// One language-model configuration (the primary or a fallback): its provider and model, defaults filled.
fn normalize_llm(prefix: &str, llm: &mut LlmConfig) -> ApiResult<()> {
    provider(&format!("{prefix}provider"), &mut llm.provider, LLM_PROVIDERS)?;
    // Left out, the local model is the server's default: the embedded default by its name, or, where the
    // operator named a file (`--local-llm`), nothing at all: that path is the operator's, and an agent
    // stored without one runs whatever default the server has when a call starts.
    if !confab_engine::providers::local_llm::default_is_operator_file() {
        default_model(&mut llm.model, &llm.provider, confab_engine::providers::local_llm::default_model());
    }
    if llm.provider == "local" {
        // An embedded model's name in its own spelling; a file's path as given.
        let model = llm.model.trim();
        llm.model = match LOCAL_LLM_MODELS.iter().find(|name| name.eq_ignore_ascii_case(model)) {
            Some(name) => name.to_string(),
            None => model.to_string(),
        };
    }
    validate::max_chars(&format!("{prefix}model"), &llm.model, validate::MAX_NAME_CHARS)
}

/// One speech-to-text configuration: its provider and model, defaults filled.
fn normalize_stt(prefix: &str, stt: &mut SttConfig) -> ApiResult<()> {
    provider(&format!("{prefix}provider"), &mut stt.provider, STT_PROVIDERS)?;
    default_model(&mut stt.model, &stt.provider, DEFAULT_STT_MODEL);
    if stt.provider == "local" {
        stt.model = stt.model.trim().to_string();
        validate::one_of(&format!("{prefix}model"), &stt.model, LOCAL_STT_MODELS)?;
    }
    validate::max_chars(&format!("{prefix}model"), &stt.model, validate::MAX_NAME_CHARS)
}

/// One text-to-speech configuration: its provider, model and voice, defaults filled.
fn normalize_tts(prefix: &str, tts: &mut TtsConfig) -> ApiResult<()> {
    provider(&format!("{prefix}provider"), &mut tts.provider, TTS_PROVIDERS)?;
    default_model(&mut tts.model_id, &tts.provider, DEFAULT_TTS_MODEL);
    validate::max_chars(&format!("{prefix}model_id"), &tts.model_id, validate::MAX_NAME_CHARS)?;
    validate::max_chars(&format!("{prefix}voice_id"), &tts.voice_id, validate::MAX_NAME_CHARS)
}

/// Ids of the knowledge bases, tools, guardrails and MCP configurations attached to an agent or template.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct Attachments {
    #[serde(default, deserialize_with = "nullable")]
    #[cfg_attr(feature = "openapi", schema(nullable))]
    pub knowledge_base_ids: Vec<String>,
    #[serde(default, deserialize_with = "nullable")]
    #[cfg_attr(feature = "openapi", schema(nullable))]
    pub tool_ids: Vec<String>,
    #[serde(default, deserialize_with = "nullable")]
    #[cfg_attr(feature = "openapi", schema(nullable))]
    pub guardrail_ids: Vec<String>,
    #[serde(default, deserialize_with = "nullable")]
    #[cfg_attr(feature = "openapi", schema(nullable))]
    pub mcp_ids: Vec<String>,
}

impl Attachments {
    /// Normalises the ids and checks that each names an existing record (400 otherwise).
    pub async fn validate(&mut self, db: &Db) -> ApiResult<()> {
        let lists = [
            ("knowledge_base_ids", &mut self.knowledge_base_ids, KNOWLEDGE_BASES),
            ("tool_ids", &mut self.tool_ids, TOOLS),
            ("guardrail_ids", &mut self.guardrail_ids, GUARDRAILS),
            ("mcp_ids", &mut self.mcp_ids, MCP_SERVERS),
        ];
        for (field, ids, collection) in lists {
            *ids = validate::uuid_list(field, ids)?;
            let missing =
                collection.missing(db, ids).await.map_err(ApiError::internal("Failed to check attachments"))?;
            if let Some(id) = missing.first() {
                return Err(ApiError::bad_request(format!(
                    "Invalid request body: {field} names \"{id}\", which does not exist"
                )));
            }
        }
        Ok(())
    }
}
