//! The providers a call's turns are labelled with in `/metrics`.

/// The providers of a call's agent, as its configuration names them (`avatars[0].config.{stt,llm,tts}.provider`).
#[derive(Debug, Clone, Default)]
pub struct Providers {
    pub stt: String,
    pub llm: String,
    pub tts: String,
}

impl Providers {
    /// From an agent's pipeline configuration (`avatars[0].config`); a provider not set is `local`.
    pub fn of_pipeline(pipeline: &confab_engine::agent_spec::PipelineConfig) -> Providers {
        let name = |provider: &str| match provider.trim() {
            "" => "local".to_string(),
            named => named.to_ascii_lowercase(),
        };
        Providers {
            stt: name(&pipeline.stt.provider),
            llm: name(&pipeline.llm.provider),
            tts: name(&pipeline.tts.provider),
        }
    }
}
