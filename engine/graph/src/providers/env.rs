//! The provider settings of the process environment (endpoints and keys: `VARIABLES`), as the binary
//! reads them once at start and hands them to every agent's providers. The engine itself reads no
//! environment variable, and a test or a benchmark gives its own settings without touching the
//! process's environment.

use std::collections::BTreeMap;

/// Every variable the providers take a setting from (docs/engine.md, Providers).
pub const VARIABLES: &[&str] = &[
    "CONFAB_LLM_BASE_URL",
    "CONFAB_LLM_API_KEY",
    "OPENAI_API_KEY",
    "GROQ_API_KEY",
    "OPENROUTER_API_KEY",
    "CONFAB_STT_BASE_URL",
    "CONFAB_STT_API_KEY",
    "CONFAB_TTS_BASE_URL",
    "CONFAB_TTS_API_KEY",
    "DEEPGRAM_API_KEY",
    "CONFAB_DEEPGRAM_URL",
    "ELEVENLABS_API_KEY",
    "CONFAB_ELEVENLABS_URL",
    "CARTESIA_API_KEY",
    "CONFAB_CARTESIA_URL",
];

/// An endpoint the operator named at start (`--llm-endpoint NAME=URL`, and STT's, TTS's): its URL and
/// key (from `CONFAB_<STAGE>_ENDPOINT_<NAME>_API_KEY`, `endpoint_key_variable`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NamedEndpoint {
    pub url: String,
    pub api_key: Option<String>,
}

/// The variable holding the key of the endpoint `name` of `stage` (`llm`, `stt`, `tts`): upper case,
/// other characters than letters and digits as `_`.
pub fn endpoint_key_variable(stage: &str, name: &str) -> String {
    let name: String =
        name.chars().map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_uppercase() } else { '_' }).collect();
    format!("CONFAB_{}_ENDPOINT_{name}_API_KEY", stage.to_ascii_uppercase())
}

/// The providers' settings: for each of `VARIABLES`, its value when set and not empty; the named
/// endpoints, by stage and name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProviderEnv {
    values: BTreeMap<&'static str, String>,
    endpoints: BTreeMap<(String, String), NamedEndpoint>,
}

impl ProviderEnv {
    /// The `VARIABLES` that `lookup` knows (the binary passes the process environment's).
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> ProviderEnv {
        let values = VARIABLES
            .iter()
            .filter_map(|&name| lookup(name).filter(|value| !value.is_empty()).map(|value| (name, value)))
            .collect();
        ProviderEnv { values, endpoints: BTreeMap::new() }
    }

    /// The same settings with `name` set to `value` (tests, benchmarks). `name` must be one of `VARIABLES`.
    pub fn with(mut self, name: &str, value: impl Into<String>) -> ProviderEnv {
        let known = VARIABLES.iter().find(|&&known| known == name);
        let name = known.unwrap_or_else(|| panic!("{name} is not a provider setting (providers::env::VARIABLES)"));
        self.values.insert(name, value.into());
        self
    }

    /// The same settings with the endpoint `name` of `stage` (`llm`, `stt`, `tts`).
    pub fn with_endpoint(mut self, stage: &str, name: &str, endpoint: NamedEndpoint) -> ProviderEnv {
        self.endpoints.insert((stage.to_string(), name.to_string()), endpoint);
        self
    }

    /// The endpoint `name` of `stage`, when the operator named it.
    pub fn endpoint(&self, stage: &str, name: &str) -> Option<&NamedEndpoint> {
        self.endpoints.get(&(stage.to_string(), name.to_string()))
    }

    /// The names of `stage`'s endpoints.
    pub fn endpoint_names(&self, stage: &str) -> Vec<&str> {
        self.endpoints.keys().filter(|(s, _)| s == stage).map(|(_, name)| name.as_str()).collect()
    }

    /// The value of `name`, when set.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.values.get(name).map(String::as_str)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_provider_variables_are_kept_and_empty_ones_are_unset() {
        let env = ProviderEnv::from_lookup(|name| match name {
            "OPENAI_API_KEY" => Some("sk-1".into()),
            "DEEPGRAM_API_KEY" => Some(String::new()),
            _ => None,
        });
        assert_eq!(env.get("OPENAI_API_KEY"), Some("sk-1"));
        assert_eq!(env.get("DEEPGRAM_API_KEY"), None);
        assert_eq!(
            env.with("CONFAB_LLM_BASE_URL", "http://127.0.0.1:9/v1").get("CONFAB_LLM_BASE_URL"),
            Some("http://127.0.0.1:9/v1")
        );
    }

    #[test]
    #[should_panic(expected = "not a provider setting")]
    fn an_unknown_name_is_refused() {
        let _ = ProviderEnv::default().with("HOME", "/root");
    }
}
