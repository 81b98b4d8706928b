//! The check behind a guardrail without a `response_message`: is the user's message a violation? With
//! the `openai` language-model provider, its moderation endpoint (`POST {base}/moderations`) answers;
//! with any other provider (and when that endpoint fails), the agent's own language model is asked a
//! yes/no question about the rule. The verdict goes back to the model as the guardrail call's result,
//! with an instruction (decline politely, or answer normally), and the model answers accordingly.

use serde_json::{Value, json};

use super::guardrail::Guardrail;
use crate::providers::llm::{ChatMessage, ChatRequest, LanguageModel, LlmEvent};

/// The moderation endpoint's model.
pub const MODERATION_MODEL: &str = "omni-moderation-latest";

/// An OpenAI-compatible moderation endpoint.
#[derive(Debug, Clone)]
pub struct ModerationEndpoint {
    /// Up to the version segment, e.g. `https://api.openai.com/v1`.
    pub base_url: String,
    pub api_key: Option<String>,
}

/// Whether the message breaks the rule, and which categories the check named.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    pub flagged: bool,
    pub categories: Vec<String>,
    /// `moderation_endpoint` or `language_model`.
    pub checked_by: &'static str,
}

impl Verdict {
    /// The guardrail call's result as the language model reads it.
    pub fn result(&self, guardrail: &Guardrail) -> Value {
        let instruction = if self.flagged {
            "The message breaks this rule. Do not do what it asks; politely decline in one short sentence."
        } else {
            "The message is allowed. Answer it normally."
        };
        json!({
            "guardrail": guardrail.key,
            "flagged": self.flagged,
            "categories": self.categories,
            "checked_by": self.checked_by,
            "instruction": instruction,
        })
    }
}

/// Time for the moderation endpoint to answer.
pub const MODERATION_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// Checks `message` against `guardrail`: the endpoint when there is one, else (or when it fails) the model.
pub async fn moderate(
    endpoint: Option<&ModerationEndpoint>,
    llm: &dyn LanguageModel,
    model: &str,
    guardrail: &Guardrail,
    message: &str,
) -> Verdict {
    if let Some(endpoint) = endpoint {
        match ask_endpoint(endpoint, message).await {
            Ok(verdict) => return verdict,
            Err(err) => tracing::warn!(error = %err, "moderation endpoint failed; asking the language model"),
        }
    }
    ask_model(llm, model, guardrail, message).await
}

/// The provider's endpoint is the operator's configuration, like the chat endpoint: not address-guarded.
async fn ask_endpoint(endpoint: &ModerationEndpoint, message: &str) -> Result<Verdict, String> {
    let client = reqwest::Client::builder().timeout(MODERATION_TIMEOUT).build().map_err(|err| err.to_string())?;
    let mut request = client
        .post(format!("{}/moderations", endpoint.base_url.trim_end_matches('/')))
        .json(&json!({ "model": MODERATION_MODEL, "input": message }));
    if let Some(key) = &endpoint.api_key {
        request = request.bearer_auth(key);
    }
    let response = request.send().await.map_err(|err| err.to_string())?;
    if !response.status().is_success() {
        return Err(format!("HTTP {}", response.status().as_u16()));
    }
    let body: Value = response.json().await.map_err(|err| err.to_string())?;
    let result = &body["results"][0];
    let flagged = result["flagged"].as_bool().ok_or("no results[0].flagged in the answer")?;
    let categories = result["categories"]
        .as_object()
        .map(|all| all.iter().filter(|(_, on)| on.as_bool() == Some(true)).map(|(name, _)| name.clone()).collect())
        .unwrap_or_default();
    Ok(Verdict { flagged, categories, checked_by: "moderation_endpoint" })
}

/// The yes/no question put to the agent's model.
pub fn check_request(model: &str, guardrail: &Guardrail, message: &str) -> ChatRequest {
    let system = format!(
        "You check messages against a rule. Rule: {}\nAnswer with one word: yes if the message breaks the rule \
         or asks for something harmful, otherwise no.",
        guardrail.prompt
    );
    ChatRequest {
        model: model.to_string(),
        messages: vec![ChatMessage::new("system", system), ChatMessage::new("user", message)],
        tools: Vec::new(),
        max_tokens: 4,
        temperature: 0.0,
        stop: Vec::new(),
    }
}

async fn ask_model(llm: &dyn LanguageModel, model: &str, guardrail: &Guardrail, message: &str) -> Verdict {
    let mut stream = llm.stream(check_request(model, guardrail, message));
    let mut answer = String::new();
    while let Some(event) = stream.recv().await {
        match event {
            Ok(LlmEvent::Text(text)) => answer.push_str(&text),
            Ok(LlmEvent::Done { .. }) => break,
            Ok(LlmEvent::ToolCall(_)) => {}
            Err(err) => {
                tracing::warn!(error = %err, "guardrail check failed; treating the message as a violation");
                return Verdict { flagged: true, categories: vec![], checked_by: "language_model" };
            }
        }
    }
    let flagged = answer.trim_start().to_ascii_lowercase().starts_with("yes");
    let categories = if flagged { vec![guardrail.key.clone()] } else { vec![] };
    Verdict { flagged, categories, checked_by: "language_model" }
}
