//! `tool.api` tools: an HTTP API the language model may call, described by a function schema. The
//! model's arguments go as a JSON body (POST, PUT, PATCH) or as query parameters (GET, DELETE); the
//! answer comes back as the call's result: the response's JSON, or `{"text": …}` when it is not JSON.
//! Each call has `TOOL_TIMEOUT` from connection to the last byte and reads at most `MAX_TOOL_RESPONSE`
//! bytes; a non-2xx status, a refused address, a timeout or a larger answer is an error result.

use std::time::Duration;

use futures_util::StreamExt;
use serde_json::{Map, Value, json};

use super::records::ToolRecord;
use crate::providers::llm::ToolSpec;

/// From sending the request to the last byte of the answer.
pub const TOOL_TIMEOUT: Duration = Duration::from_secs(10);
/// Largest answer read, in bytes.
pub const MAX_TOOL_RESPONSE: usize = 64 * 1024;

/// What the agent says around a call (empty strings are not spoken).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EventMessages {
    pub on_start: String,
    /// Said when the call has taken longer than this.
    pub on_delay: Option<(Duration, String)>,
    pub on_success: String,
    pub on_error: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ApiTool {
    pub spec: ToolSpec,
    pub method: reqwest::Method,
    pub url: String,
    pub headers: Vec<(String, String)>,
    pub messages: EventMessages,
}

impl ApiTool {
    /// From a Tool record; None for other types or a record without a usable name, method or URL.
    pub fn from_record(record: &ToolRecord) -> Option<ApiTool> {
        if !record.tool_type.is_empty() && record.tool_type != "tool.api" {
            return None;
        }
        let schema = &record.schema;
        let name = Some(schema.name.clone()).filter(|n| !n.is_empty())?;
        let config = &record.request_config;
        let method = if config.method.is_empty() { "GET" } else { config.method.as_str() };
        let method = method.to_ascii_uppercase().parse().ok()?;
        let url = Some(config.url.clone()).filter(|u| !u.is_empty())?;
        let headers = config.headers.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        let messages = &record.event_messages;
        let on_delay = messages
            .on_delay
            .delay
            .filter(|delay| delay.is_finite() && *delay > 0.0)
            .map(|delay| (Duration::from_secs_f64(delay), messages.on_delay.message.trim().to_string()))
            .filter(|(_, message)| !message.is_empty());
        let parameters = match &schema.parameters {
            Some(parameters) if parameters.is_object() => parameters.clone(),
            _ => json!({ "type": "object", "properties": {} }),
        };
        Some(ApiTool {
            spec: ToolSpec { name, description: schema.description.clone(), parameters },
            method,
            url,
            headers,
            messages: EventMessages {
                on_start: messages.on_start.message.trim().to_string(),
                on_delay,
                on_success: messages.on_success.message.trim().to_string(),
                on_error: messages.on_error.message.trim().to_string(),
            },
        })
    }

    /// Makes the request with the model's `arguments` (a JSON object) through `client` (built by
    /// `outbound::guard` with the same `allow_private`); the result or an error message.
    pub async fn call(
        &self,
        client: &reqwest::Client,
        allow_private: bool,
        arguments: &Map<String, Value>,
    ) -> Result<Value, String> {
        let url = url::Url::parse(&self.url).map_err(|err| format!("the tool's URL is not valid: {err}"))?;
        crate::outbound::guard::check_url(&url, allow_private)?;
        let mut request = if matches!(self.method, reqwest::Method::GET | reqwest::Method::DELETE) {
            let query: Vec<(&str, String)> = arguments.iter().map(|(k, v)| (k.as_str(), query_value(v))).collect();
            client.request(self.method.clone(), url).query(&query)
        } else {
            client.request(self.method.clone(), url).json(arguments)
        };
        for (name, value) in &self.headers {
            request = request.header(name, value);
        }
        let response = request.send().await.map_err(|err| describe(&err))?;
        let status = response.status();
        let body = read_limited(response).await?;
        let text = String::from_utf8_lossy(&body);
        if !status.is_success() {
            let detail: String = text.chars().take(300).collect();
            return Err(format!("HTTP {}: {detail}", status.as_u16()));
        }
        Ok(serde_json::from_slice(&body).unwrap_or_else(|_| json!({ "text": text })))
    }
}

/// A query parameter's text: strings as they are, everything else as JSON.
fn query_value(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

/// The error's message with its causes (reqwest's own message hides the guard's refusal).
fn describe(err: &reqwest::Error) -> String {
    let mut message = if err.is_timeout() { "the tool timed out".to_string() } else { err.to_string() };
    let mut source = std::error::Error::source(err);
    while let Some(cause) = source {
        message.push_str(&format!(": {cause}"));
        source = cause.source();
    }
    message
}

async fn read_limited(response: reqwest::Response) -> Result<Vec<u8>, String> {
    if response.content_length().is_some_and(|length| length as usize > MAX_TOOL_RESPONSE) {
        return Err(format!("the tool's answer is larger than {MAX_TOOL_RESPONSE} bytes"));
    }
    let mut body = Vec::new();
    let mut chunks = response.bytes_stream();
    while let Some(chunk) = chunks.next().await {
        let chunk = chunk.map_err(|err| describe(&err))?;
        if body.len() + chunk.len() > MAX_TOOL_RESPONSE {
            return Err(format!("the tool's answer is larger than {MAX_TOOL_RESPONSE} bytes"));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(json: Value) -> ToolRecord {
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn reads_the_tool_record() {
        let tool = ApiTool::from_record(&record(json!({
            "type": "tool.api",
            "schema": { "type": "function", "name": "get_weather", "description": "Weather in a city",
                        "parameters": { "type": "object", "properties": { "city": { "type": "string" } }, "required": ["city"] } },
            "request_config": { "method": "post", "url": "https://api.example.com/w", "headers": { "x-key": "k" } },
            "event_messages": { "on_start": { "message": "Let me check." }, "on_delay": { "delay": 1.5, "message": "Still checking." },
                                "on_success": { "message": "" }, "on_error": { "message": "That failed." } }
        })))
        .unwrap();
        assert_eq!(tool.spec.name, "get_weather");
        assert_eq!(tool.method, reqwest::Method::POST);
        assert_eq!(tool.headers, [("x-key".to_string(), "k".to_string())]);
        assert_eq!(
            tool.messages,
            EventMessages {
                on_start: "Let me check.".into(),
                on_delay: Some((Duration::from_millis(1500), "Still checking.".into())),
                on_success: String::new(),
                on_error: "That failed.".into(),
            }
        );
        assert!(ApiTool::from_record(&record(json!({ "type": "tool.other", "schema": { "name": "x" } }))).is_none());
        assert!(ApiTool::from_record(&record(json!({ "schema": { "name": "x" }, "request_config": {} }))).is_none());
    }

    #[test]
    fn query_values_are_plain_text() {
        assert_eq!(query_value(&json!("Paris")), "Paris");
        assert_eq!(query_value(&json!(3)), "3");
        assert_eq!(query_value(&json!(["a", 1])), "[\"a\",1]");
    }
}
