//! Guardrails: rules the language model checks the user's message against. Each is offered to the model
//! as a tool named by the guardrail's `key` and described by its `prompt`; the model calls it when the
//! message matches the rule.
//!
//! When one fires, its `callback_url` (if any) receives one `guardrail_triggered` event, signed like the
//! webhooks (Standard Webhooks, the agent's secret), fire-and-forget: no retries, a failure is logged.
//! Body: `{timestamp, conversation_id, type: "guardrail", event: {name: "guardrail_triggered", payload:
//! {guardrail_id, key, name, category, user_message, response_message}}}`.

use std::time::Duration;

use serde_json::{Value, json};

use super::records::GuardrailRecord;
use crate::outbound::signing;
use crate::providers::llm::ToolSpec;

/// Time for the callback, connection to answer.
pub const CALLBACK_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Debug, Clone, PartialEq)]
pub struct Guardrail {
    pub id: String,
    pub key: String,
    pub name: String,
    pub category: String,
    pub prompt: String,
    /// Spoken verbatim when the guardrail fires; empty: the message is moderated instead.
    pub response_message: String,
    pub callback_url: String,
}

impl Guardrail {
    /// From a Guardrail record; None without a key.
    pub fn from_record(record: &GuardrailRecord) -> Option<Guardrail> {
        let text = |field: &str| field.trim().to_string();
        let key = text(&record.key);
        (!key.is_empty()).then(|| Guardrail {
            id: text(&record.id),
            key,
            name: text(&record.name),
            category: text(&record.category),
            prompt: text(&record.prompt),
            response_message: text(&record.response_message),
            callback_url: text(&record.callback_url),
        })
    }

    pub fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: self.key.clone(),
            description: format!(
                "Guardrail \"{}\". Call this, before answering, when the user's last message matches this rule: {}",
                self.name, self.prompt
            ),
            parameters: json!({ "type": "object", "properties": {}, "required": [] }),
        }
    }

    /// The `guardrail_triggered` body for `user_message` in `conversation_id`, at `unix_timestamp`.
    pub fn triggered_body(&self, conversation_id: &str, user_message: &str, unix_timestamp: f64) -> Value {
        json!({
            "timestamp": unix_timestamp,
            "conversation_id": conversation_id,
            "type": "guardrail",
            "event": {
                "name": "guardrail_triggered",
                "payload": {
                    "guardrail_id": self.id,
                    "key": self.key,
                    "name": self.name,
                    "category": self.category,
                    "user_message": user_message,
                    "response_message": self.response_message,
                }
            }
        })
    }
}

/// Posts `body` to `url` once, signed with `secret`, in the background (the task is returned); the
/// outcome is only logged.
pub fn notify(
    client: &reqwest::Client,
    url: &str,
    secret: &str,
    body: Value,
    allow_private: bool,
) -> Option<tokio::task::JoinHandle<()>> {
    let target = match url::Url::parse(url) {
        Ok(target) => target,
        Err(err) => {
            tracing::warn!(%url, error = %err, "guardrail callback URL is not valid; not sent");
            return None;
        }
    };
    if let Err(refused) = crate::outbound::guard::check_url(&target, allow_private) {
        tracing::warn!(%url, %refused, "guardrail callback refused");
        return None;
    }
    let body = body.to_string();
    let id = format!("msg_{}", uuid::Uuid::new_v4().simple());
    let timestamp = chrono::Utc::now().timestamp();
    let mut request = client
        .post(target)
        .header("content-type", "application/json")
        .header("webhook-id", &id)
        .header("webhook-timestamp", timestamp.to_string());
    match signing::sign(secret, &id, timestamp, body.as_bytes()) {
        Ok(signature) => request = request.header("webhook-signature", signature),
        Err(err) => tracing::warn!(error = %err, "guardrail callback sent unsigned: the agent has no usable secret"),
    }
    let request = request.body(body);
    Some(tokio::spawn(async move {
        match request.send().await {
            Ok(response) if response.status().is_success() => {}
            Ok(response) => {
                tracing::warn!(status = response.status().as_u16(), "guardrail callback refused; not retried")
            }
            Err(err) => tracing::warn!(error = %err, "guardrail callback failed; not retried"),
        }
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_guardrail_is_a_tool_named_by_its_key() {
        let record = |json: Value| -> GuardrailRecord { serde_json::from_value(json).unwrap() };
        let guardrail = Guardrail::from_record(&record(json!({
            "id": "g1", "key": "no_medical_advice", "name": "No medical advice", "category": "safety",
            "prompt": "The user asks for a diagnosis.", "response_message": "I can't give medical advice.",
            "callback_url": "https://hooks.example.com/g"
        })))
        .unwrap();
        let spec = guardrail.spec();
        assert_eq!(spec.name, "no_medical_advice");
        assert!(spec.description.contains("The user asks for a diagnosis."));
        let body = guardrail.triggered_body("c1", "Do I have the flu?", 1.5);
        assert_eq!(body["event"]["name"], "guardrail_triggered");
        assert_eq!(body["event"]["payload"]["guardrail_id"], "g1");
        assert_eq!(body["event"]["payload"]["user_message"], "Do I have the flu?");
        assert!(Guardrail::from_record(&record(json!({ "name": "x" }))).is_none());
    }
}
