//! Reads what the engine needs from an Agent resource (SPEC.md's shape, e.g. `AGENT.json` of
//! `confab simulate`): the first avatar's pipeline settings and the agent-level `config`.

use serde::Deserialize;
use serde_json::Value;

use crate::conversation::ConversationConfig;
use crate::core::presets::{Interruptability, TurnHandling, endpoint_config};
use crate::time::MediaTime;

#[derive(Debug, Clone, Default, Deserialize)]
pub struct AgentSpec {
    #[serde(default)]
    pub agent_name: String,
    #[serde(default)]
    pub agent_system_prompt: String,
    #[serde(default)]
    pub avatars: Vec<AvatarSpec>,
    #[serde(default)]
    pub config: AgentSettingsSpec,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct AvatarSpec {
    /// The face: a stock avatar id (`stock-amara` …) or a custom avatar's id.
    #[serde(default)]
    pub avatar_key_id: String,
    #[serde(default)]
    pub config: PipelineSpec,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct PipelineSpec {
    #[serde(default)]
    pub llm: Value,
    #[serde(default)]
    pub stt: SttSpec,
    #[serde(default)]
    pub tts: Value,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct SttSpec {
    #[serde(default)]
    pub provider: String,
    #[serde(default)]
    pub model: String,
    pub min_endpointing_delay: Option<f64>,
    pub max_endpointing_delay: Option<f64>,
    pub turn_handling: Option<String>,
    pub interruptability: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct AgentSettingsSpec {
    /// Seconds.
    #[serde(rename = "maxCallDuration")]
    pub max_call_duration: Option<f64>,
    #[serde(rename = "conversationalContext", default)]
    pub conversational_context: String,
}

#[derive(Debug, thiserror::Error)]
pub enum AgentSpecError {
    #[error("the agent description is not valid JSON of the Agent shape: {0}")]
    Json(#[from] serde_json::Error),
    #[error("unknown {field} \"{value}\"")]
    UnknownPreset { field: &'static str, value: String },
}

impl AgentSpec {
    pub fn from_json(text: &str) -> Result<AgentSpec, AgentSpecError> {
        Ok(serde_json::from_str(text)?)
    }

    /// The turn-taking configuration (defaults where the agent is silent).
    pub fn conversation_config(&self) -> Result<ConversationConfig, AgentSpecError> {
        let stt = self.avatars.first().map(|avatar| avatar.config.stt.clone()).unwrap_or_default();
        let turn_handling = match stt.turn_handling.as_deref() {
            None => None,
            Some(name) => Some(
                TurnHandling::parse(name)
                    .ok_or(AgentSpecError::UnknownPreset { field: "turn_handling", value: name.into() })?,
            ),
        };
        let interruption = match stt.interruptability.as_deref() {
            None => Interruptability::Medium.config(false),
            Some(name) => Interruptability::parse(name)
                .ok_or(AgentSpecError::UnknownPreset { field: "interruptability", value: name.into() })?
                .config(false),
        };
        Ok(ConversationConfig {
            endpoint: endpoint_config(stt.min_endpointing_delay, stt.max_endpointing_delay, turn_handling),
            interruption,
            max_call_duration: self.config.max_call_duration.filter(|s| *s > 0.0).map(MediaTime::from_secs_f64),
            ..ConversationConfig::default()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The `agent_json` fuzz target's first crash (an overflow of `now + maxCallDuration`), kept: extreme
    /// durations and delays run a conversation without panicking.
    #[test]
    fn extreme_durations_and_delays_run_a_conversation() {
        let spec = AgentSpec::from_json(
            r#"{"config": {"max_call_duration": 1e+300}, "avatars": [{"config": {"stt":
                {"min_endpointing_delay": -5, "max_endpointing_delay": 1e+308}}}]}"#,
        )
        .unwrap();
        let mut conversation = crate::conversation::Conversation::new(spec.conversation_config().unwrap());
        let mut frame = [0.0f32; 320];
        for window in 0..100u64 {
            let (start, end) = (MediaTime::from_millis(window * 32), MediaTime::from_millis((window + 1) * 32));
            conversation.vad_window(start, end, if window < 31 { 0.95 } else { 0.02 });
            while let Some(deadline) = conversation.poll_timeout().filter(|d| *d <= end) {
                conversation.handle_timeout(deadline);
            }
            conversation.render(end, &mut frame);
            while conversation.poll_output().is_some() {}
        }
        conversation.end_call(MediaTime::from_millis(3_200));
        assert!(conversation.is_ended());
    }

    #[test]
    fn reads_the_agent_shape() {
        let spec = AgentSpec::from_json(
            r#"{"agent_name":"A","avatars":[{"avatar_key_id":"x","config":{"stt":{"min_endpointing_delay":0.3,"turn_handling":"deliberate","interruptability":"high"}}}],"config":{"maxCallDuration":120}}"#,
        )
        .unwrap();
        let config = spec.conversation_config().unwrap();
        assert_eq!(config.endpoint.min_delay, MediaTime::from_millis(300));
        assert_eq!(config.endpoint.max_delay, MediaTime::from_millis(5000));
        assert_eq!(config.interruption.min_duration, MediaTime::from_millis(250));
        assert_eq!(config.max_call_duration, Some(MediaTime::from_millis(120_000)));
        assert!(AgentSpec::from_json("{}").unwrap().conversation_config().is_ok());
        let bad = AgentSpec::from_json(r#"{"avatars":[{"config":{"stt":{"turn_handling":"eager"}}}]}"#).unwrap();
        assert!(bad.conversation_config().is_err());
        assert!(AgentSpec::from_json("[1,2]").is_err());
    }
}
