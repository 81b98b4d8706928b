//! The providers of one avatar's conversations (`avatars[].config` of an agent or template: `llm`, `stt`,
//! `tts`), the one typed configuration both the API and the engine use: the API reads a request body into
//! it, validates and normalizes it (`confab_store::agent_config::PipelineRules`) and stores it; a call's
//! engine chooses its adapters from it (`providers::select`). Providers left empty mean `local`, the
//! embedded offline models. With the `openapi` feature (the HTTP side's) the types describe themselves
//! in the OpenAPI document.

use std::time::Duration;

use serde::{Deserialize, Deserializer, Serialize};

/// Default `first_response_timeout` of a language model: seconds to its first token.
pub const LLM_FIRST_RESPONSE_TIMEOUT: f64 = 2.0;
/// Default `first_response_timeout` of speech-to-text: seconds from the end of speech to the transcript.
pub const STT_FIRST_RESPONSE_TIMEOUT: f64 = 1.5;
/// Default `first_response_timeout` of text-to-speech: seconds to the first audio.
pub const TTS_FIRST_RESPONSE_TIMEOUT: f64 = 1.5;

/// A stage's deadline: `seconds` when given (and positive, finite), else `default`.
pub fn first_response(seconds: Option<f64>, default: f64) -> Duration {
    Duration::from_secs_f64(seconds.filter(|s| s.is_finite() && *s > 0.0 && *s <= 3600.0).unwrap_or(default))
}

/// Deserializes `null` as the type's default, so clients may send `null` for any optional field.
pub fn nullable<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Option::<T>::deserialize(deserializer).map(Option::unwrap_or_default)
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PipelineConfig {
    #[serde(default, deserialize_with = "nullable")]
    #[cfg_attr(feature = "openapi", schema(nullable))]
    pub llm: LlmConfig,
    #[serde(default, deserialize_with = "nullable")]
    #[cfg_attr(feature = "openapi", schema(nullable))]
    pub stt: SttConfig,
    #[serde(default, deserialize_with = "nullable")]
    #[cfg_attr(feature = "openapi", schema(nullable))]
    pub tts: TtsConfig,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct LlmConfig {
    /// `local` (default), `openai`, `groq`, `openrouter` or `custom`.
    #[serde(default, deserialize_with = "nullable")]
    #[cfg_attr(feature = "openapi", schema(nullable))]
    pub provider: String,
    #[serde(default, deserialize_with = "nullable")]
    #[cfg_attr(feature = "openapi", schema(nullable))]
    pub model: String,
    /// Ask the model for the reply during the endpointing delay, on the transcript prepared then, and
    /// drop it if the user goes on (default true).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preemptive_generation: Option<bool>,
    /// An endpoint the operator named at start (`--llm-endpoint NAME=URL`), for this provider's URL and key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    /// Seconds to the first token before this provider counts as failed for the request (the next in
    /// `fallbacks` is tried; no retry on this one past it); also the longest silence between two pieces
    /// of its stream. Default 2.0 s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_response_timeout: Option<f64>,
    /// Seconds after which, when this provider has not answered yet, the first fallback is asked too; the
    /// first to answer is used and the other cancelled (the primary only; needs a fallback).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hedge_after: Option<f64>,
    /// Configurations of the same shape tried in order when the one before fails for a request (they do
    /// not nest).
    #[serde(default, deserialize_with = "nullable", skip_serializing_if = "Vec::is_empty")]
    #[cfg_attr(feature = "openapi", schema(no_recursion))]
    pub fallbacks: Vec<LlmConfig>,
}

/// `config.stt`, with the turn-taking settings that ride in it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SttConfig {
    /// `local` (default), `deepgram`, `openai` or `custom`.
    #[serde(default, deserialize_with = "nullable")]
    #[cfg_attr(feature = "openapi", schema(nullable))]
    pub provider: String,
    #[serde(default, deserialize_with = "nullable")]
    #[cfg_attr(feature = "openapi", schema(nullable))]
    pub model: String,
    /// Seconds of silence after the last speech before a finished turn is committed (engine default 0.5).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_endpointing_delay: Option<f64>,
    /// Longest wait, in seconds, when the turn model expects the user to continue (engine default 3.0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_endpointing_delay: Option<f64>,
    /// Preset: `proactive`, `balanced` or `deliberate`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn_handling: Option<String>,
    /// Preset: `low`, `medium` or `high`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interruptability: Option<String>,
    /// Speech over the agent made only of backchannels ("mm-hmm", "yeah", "okay"): `ignore` (the default:
    /// the agent talks on) or `interrupt` (any overlap long enough interrupts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backchannels: Option<String>,
    /// Steady noise taken out of the user's audio before it is heard: `auto` (the default: once the call's
    /// noise floor says the room is noisy), `on` (from the first frame) or `off`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub noise_suppression: Option<String>,
    /// Voices well below the user's once the user has been heard: `ignore` (the default: they neither open
    /// a turn nor reach the transcript) or `hear` (every voice is the user's). A meeting hears every
    /// voice.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub other_voices: Option<String>,
    /// An endpoint the operator named at start (`--stt-endpoint NAME=URL`), for this provider's URL and key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    /// Seconds to the first final transcript after the end of speech before this provider counts as failed for the request (the next in
    /// `fallbacks` is tried; no retry on this one past it); also the longest silence between two pieces
    /// of its stream. Default 1.5 s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_response_timeout: Option<f64>,
    /// Seconds after which, when this provider has not answered yet, the first fallback is asked too; the
    /// first to answer is used and the other cancelled (the primary only; needs a fallback).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hedge_after: Option<f64>,
    /// Configurations of the same shape tried in order when the one before fails for a request (they do
    /// not nest; turn-taking fields belong to the primary only).
    #[serde(default, deserialize_with = "nullable", skip_serializing_if = "Vec::is_empty")]
    #[cfg_attr(feature = "openapi", schema(no_recursion))]
    pub fallbacks: Vec<SttConfig>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TtsConfig {
    /// `local` (default), `elevenlabs`, `cartesia`, `openai` or `custom`.
    #[serde(default, deserialize_with = "nullable")]
    #[cfg_attr(feature = "openapi", schema(nullable))]
    pub provider: String,
    #[serde(default, deserialize_with = "nullable")]
    #[cfg_attr(feature = "openapi", schema(nullable))]
    pub model_id: String,
    #[serde(default, deserialize_with = "nullable")]
    #[cfg_attr(feature = "openapi", schema(nullable))]
    pub voice_id: String,
    /// An endpoint the operator named at start (`--tts-endpoint NAME=URL`), for this provider's URL and key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    /// Seconds to the first audio before this provider counts as failed for the request (the next in
    /// `fallbacks` is tried; no retry on this one past it); also the longest silence between two pieces
    /// of its stream. Default 1.5 s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_response_timeout: Option<f64>,
    /// Seconds after which, when this provider has not answered yet, the first fallback is asked too; the
    /// first to answer is used and the other cancelled (the primary only; needs a fallback).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hedge_after: Option<f64>,
    /// Configurations of the same shape tried in order when the one before fails for a request (they do
    /// not nest).
    #[serde(default, deserialize_with = "nullable", skip_serializing_if = "Vec::is_empty")]
    #[cfg_attr(feature = "openapi", schema(no_recursion))]
    pub fallbacks: Vec<TtsConfig>,
}
