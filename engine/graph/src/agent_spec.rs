//! What the engine runs of an agent: its prompt, its avatars with their pipelines (`PipelineConfig`, the
//! one typed configuration the API validates and stores), the agent-level `config`, and its actions
//! (`actions::records`). Built from the stored agent by the call seam (`confab_calls::SessionSpec`), or
//! read from an Agent resource in SPEC.md's shape (`AGENT.json` of `confab simulate`).

use serde::Deserialize;

use crate::actions::records::ActionsSpec;
use crate::audio::denoise::NoiseSuppression;
use crate::conversation::ConversationConfig;
use crate::core::interruption::Backchannels;
use crate::core::other_voices::OtherVoices;
use crate::core::presets::{Interruptability, TurnHandling, endpoint_config};
pub use crate::pipeline_config::{LlmConfig, PipelineConfig, SttConfig, TtsConfig, nullable};
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
    /// Its tools, guardrails and MCP servers, and the secret its callbacks are signed with.
    #[serde(flatten)]
    pub actions: ActionsSpec,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct AvatarSpec {
    /// The face: a stock avatar id (`stock-amara` …) or a custom avatar's id.
    #[serde(default)]
    pub avatar_key_id: String,
    #[serde(default)]
    pub config: PipelineConfig,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct AgentSettingsSpec {
    /// Seconds.
    #[serde(rename = "maxCallDuration")]
    pub max_call_duration: Option<f64>,
    #[serde(rename = "conversationalContext", default)]
    pub conversational_context: String,
}

impl PipelineConfig {
    /// The pipeline of the agent's first avatar (every provider local when it has none).
    pub fn of_agent(spec: &AgentSpec) -> PipelineConfig {
        spec.avatars.first().map(|avatar| avatar.config.clone()).unwrap_or_default()
    }
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

    /// Makes the avatar `avatar_key_id` the first (the one a conversation speaks with: its providers, its
    /// turn-taking, its face); unchanged when the agent has no such avatar.
    pub fn speak_with(&mut self, avatar_key_id: &str) {
        if let Some(index) = self.avatars.iter().position(|avatar| avatar.avatar_key_id == avatar_key_id) {
            let chosen = self.avatars.remove(index);
            self.avatars.insert(0, chosen);
        }
    }

    /// The language model's system prompt for one conversation: the agent's prompt, then its
    /// conversational context, then the conversation's own `context`, each when not empty. Live calls and
    /// `confab simulate` build it here alike.
    pub fn system_prompt(&self, conversation_context: &str) -> String {
        let mut prompt = self.agent_system_prompt.clone();
        for extra in [self.config.conversational_context.as_str(), conversation_context] {
            if !extra.is_empty() {
                prompt = format!("{prompt}\n\n{extra}");
            }
        }
        prompt
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
        let mut interruption = match stt.interruptability.as_deref() {
            None => Interruptability::Medium.config(false),
            Some(name) => Interruptability::parse(name)
                .ok_or(AgentSpecError::UnknownPreset { field: "interruptability", value: name.into() })?
                .config(false),
        };
        if let Some(name) = stt.backchannels.as_deref() {
            interruption.backchannels = Backchannels::parse(name)
                .ok_or(AgentSpecError::UnknownPreset { field: "backchannels", value: name.into() })?;
        }
        let noise_suppression = match stt.noise_suppression.as_deref() {
            None => NoiseSuppression::default(),
            Some(name) => NoiseSuppression::parse(name)
                .ok_or(AgentSpecError::UnknownPreset { field: "noise_suppression", value: name.into() })?,
        };
        let other_voices = match stt.other_voices.as_deref() {
            None => OtherVoices::default(),
            Some(name) => OtherVoices::parse(name)
                .ok_or(AgentSpecError::UnknownPreset { field: "other_voices", value: name.into() })?,
        };
        Ok(ConversationConfig {
            endpoint: endpoint_config(stt.min_endpointing_delay, stt.max_endpointing_delay, turn_handling),
            interruption,
            noise_suppression,
            other_voices,
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
