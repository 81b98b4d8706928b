//! The rules for a stage's chain of providers (`llm`, `stt`, `tts` of an avatar's config): its
//! `fallbacks` (same shape, tried in order; they do not nest and none repeats the primary or an earlier
//! entry), each configuration's `first_response_timeout` and named `endpoint`, and the primary's
//! `hedge_after`. Run after each configuration's own fields were normalized (`PipelineRules::normalize`),
//! so that duplicates are compared in their normal form.

use crate::error::{ApiError, ApiResult};

use super::{LlmConfig, PipelineConfig, SttConfig, TtsConfig};

/// Most fallbacks one stage may list.
pub const MAX_FALLBACKS: usize = 4;
/// Longest `first_response_timeout` or `hedge_after` accepted, in seconds.
pub const MAX_STAGE_SECONDS: f64 = 60.0;

fn bad(message: String) -> ApiError {
    ApiError::bad_request(format!("Invalid request body: {message}"))
}

/// An endpoint name as the operator's `--llm-endpoint NAME=URL` (and STT's, TTS's) may give it: 1–64 ASCII
/// letters, digits, `-`, `_` or `.`.
pub fn endpoint_name_ok(name: &str) -> bool {
    (1..=64).contains(&name.len()) && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
}

fn seconds(field: String, value: Option<f64>) -> ApiResult<()> {
    match value {
        Some(s) if !(s.is_finite() && s > 0.0 && s <= MAX_STAGE_SECONDS) => {
            Err(bad(format!("{field} must be more than 0 and at most {MAX_STAGE_SECONDS} seconds")))
        }
        _ => Ok(()),
    }
}

/// What every configuration of a chain may carry: a deadline, and a named endpoint for a provider that
/// is not `local`.
fn link(prefix: &str, provider: &str, endpoint: &Option<String>, timeout: Option<f64>) -> ApiResult<()> {
    seconds(format!("{prefix}first_response_timeout"), timeout)?;
    match endpoint {
        Some(name) if !endpoint_name_ok(name) => Err(bad(format!(
            "{prefix}endpoint must be 1 to 64 letters, digits, '-', '_' or '.' (a name the server was started with)"
        ))),
        Some(_) if provider == "local" => Err(bad(format!("{prefix}endpoint is for a provider that is not local"))),
        _ => Ok(()),
    }
}

/// One stage: its entries are distinct and do not nest; the primary's hedge needs a fallback to ask.
fn stage<T: PartialEq>(
    prefix: &str,
    identity: impl Fn(&T) -> T,
    primary: &T,
    entries: &[T],
    nested: impl Fn(&T) -> Option<&'static str>,
    hedge_after: Option<f64>,
) -> ApiResult<()> {
    if entries.len() > MAX_FALLBACKS {
        return Err(bad(format!("{prefix}fallbacks may list at most {MAX_FALLBACKS} configurations")));
    }
    seconds(format!("{prefix}hedge_after"), hedge_after)?;
    if hedge_after.is_some() && entries.is_empty() {
        return Err(bad(format!("{prefix}hedge_after needs a fallback to ask")));
    }
    let mut seen = vec![identity(primary)];
    for (index, entry) in entries.iter().enumerate() {
        let field = format!("{prefix}fallbacks[{index}]");
        if let Some(name) = nested(entry) {
            return Err(bad(format!("{field}.{name} belongs to the primary configuration only")));
        }
        let key = identity(entry);
        if let Some(earlier) = seen.iter().position(|other| *other == key) {
            let what = if earlier == 0 { "the primary".to_string() } else { format!("fallbacks[{}]", earlier - 1) };
            return Err(bad(format!("{field} is the same as {what}")));
        }
        seen.push(key);
    }
    Ok(())
}

fn llm_identity(llm: &LlmConfig) -> LlmConfig {
    LlmConfig {
        provider: llm.provider.clone(),
        model: llm.model.trim().to_string(),
        endpoint: llm.endpoint.clone(),
        ..LlmConfig::default()
    }
}

fn stt_identity(stt: &SttConfig) -> SttConfig {
    SttConfig {
        provider: stt.provider.clone(),
        model: stt.model.trim().to_string(),
        endpoint: stt.endpoint.clone(),
        ..SttConfig::default()
    }
}

fn tts_identity(tts: &TtsConfig) -> TtsConfig {
    TtsConfig {
        provider: tts.provider.clone(),
        model_id: tts.model_id.trim().to_string(),
        voice_id: tts.voice_id.trim().to_string(),
        endpoint: tts.endpoint.clone(),
        ..TtsConfig::default()
    }
}

fn llm_nested(llm: &LlmConfig) -> Option<&'static str> {
    if !llm.fallbacks.is_empty() {
        Some("fallbacks")
    } else if llm.hedge_after.is_some() {
        Some("hedge_after")
    } else if llm.preemptive_generation.is_some() {
        Some("preemptive_generation")
    } else {
        None
    }
}

fn stt_nested(stt: &SttConfig) -> Option<&'static str> {
    [
        ("fallbacks", !stt.fallbacks.is_empty()),
        ("hedge_after", stt.hedge_after.is_some()),
        ("min_endpointing_delay", stt.min_endpointing_delay.is_some()),
        ("max_endpointing_delay", stt.max_endpointing_delay.is_some()),
        ("turn_handling", stt.turn_handling.is_some()),
        ("interruptability", stt.interruptability.is_some()),
        ("backchannels", stt.backchannels.is_some()),
        ("noise_suppression", stt.noise_suppression.is_some()),
        ("other_voices", stt.other_voices.is_some()),
    ]
    .into_iter()
    .find_map(|(name, set)| set.then_some(name))
}

fn tts_nested(tts: &TtsConfig) -> Option<&'static str> {
    if !tts.fallbacks.is_empty() {
        Some("fallbacks")
    } else if tts.hedge_after.is_some() {
        Some("hedge_after")
    } else {
        None
    }
}

/// Every stage's chain of one avatar's config (`prefix`: `avatars[N].config.`).
pub(super) fn check(prefix: &str, config: &PipelineConfig) -> ApiResult<()> {
    let (llm, stt, tts) = (&config.llm, &config.stt, &config.tts);
    let llm_prefix = format!("{prefix}llm.");
    link(&llm_prefix, &llm.provider, &llm.endpoint, llm.first_response_timeout)?;
    for (i, entry) in llm.fallbacks.iter().enumerate() {
        link(&format!("{llm_prefix}fallbacks[{i}]."), &entry.provider, &entry.endpoint, entry.first_response_timeout)?;
    }
    stage(&llm_prefix, llm_identity, llm, &llm.fallbacks, llm_nested, llm.hedge_after)?;

    let stt_prefix = format!("{prefix}stt.");
    link(&stt_prefix, &stt.provider, &stt.endpoint, stt.first_response_timeout)?;
    for (i, entry) in stt.fallbacks.iter().enumerate() {
        link(&format!("{stt_prefix}fallbacks[{i}]."), &entry.provider, &entry.endpoint, entry.first_response_timeout)?;
    }
    stage(&stt_prefix, stt_identity, stt, &stt.fallbacks, stt_nested, stt.hedge_after)?;

    let tts_prefix = format!("{prefix}tts.");
    link(&tts_prefix, &tts.provider, &tts.endpoint, tts.first_response_timeout)?;
    for (i, entry) in tts.fallbacks.iter().enumerate() {
        link(&format!("{tts_prefix}fallbacks[{i}]."), &entry.provider, &entry.endpoint, entry.first_response_timeout)?;
    }
    stage(&tts_prefix, tts_identity, tts, &tts.fallbacks, tts_nested, tts.hedge_after)
}
