//! OpenAI-compatible chat completions with `stream: true`: one adapter for `openai`, `groq`,
//! `openrouter` and `custom` endpoints (vLLM, llama.cpp server, Ollama…). Reads the SSE stream of
//! `chat.completion.chunk` objects: `delta.content` text and `delta.tool_calls` pieces (by `index`, the
//! `id` and `function.name` first, `function.arguments` in fragments), until `data: [DONE]`.

use std::collections::BTreeMap;
use std::time::Instant;

use futures_util::StreamExt;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::llm::{ChatRequest, LanguageModel, LlmEvent, LlmStream, ToolCall};
use super::sse::SseParser;
use super::{CallMetrics, CallPolicy, ProviderError};

/// Chunks buffered between the HTTP stream and the engine. Full: the adapter waits (backpressure).
pub const LLM_STREAM_CAPACITY: usize = 64;

#[derive(Debug, Clone)]
pub struct OpenAiCompatible {
    pub provider: &'static str,
    /// Up to and including the version segment, e.g. `https://api.openai.com/v1`.
    pub base_url: String,
    pub api_key: Option<String>,
    pub policy: CallPolicy,
    client: reqwest::Client,
}

/// Default base URL and API-key variable of each provider name; `custom` needs `CONFAB_LLM_BASE_URL`.
pub fn provider_defaults(provider: &str) -> Option<(&'static str, &'static str, &'static str)> {
    match provider {
        "openai" => Some(("openai", "https://api.openai.com/v1", "OPENAI_API_KEY")),
        "groq" => Some(("groq", "https://api.groq.com/openai/v1", "GROQ_API_KEY")),
        "openrouter" => Some(("openrouter", "https://openrouter.ai/api/v1", "OPENROUTER_API_KEY")),
        "custom" => Some(("custom", "", "CONFAB_LLM_API_KEY")),
        _ => None,
    }
}

impl OpenAiCompatible {
    pub fn new(
        provider: &'static str,
        base_url: impl Into<String>,
        api_key: Option<String>,
        policy: CallPolicy,
    ) -> OpenAiCompatible {
        let client = reqwest::Client::builder()
            .connect_timeout(policy.connect_timeout)
            .build()
            .expect("an HTTP client with default TLS");
        OpenAiCompatible {
            provider,
            base_url: base_url.into().trim_end_matches('/').to_string(),
            api_key,
            policy,
            client,
        }
    }

    /// From the provider settings: `CONFAB_LLM_BASE_URL` overrides the base URL, the key from the provider's
    /// variable.
    pub fn from_settings(provider: &str, env: &super::env::ProviderEnv) -> Result<OpenAiCompatible, ProviderError> {
        let (name, default_url, key_var) = provider_defaults(provider)
            .ok_or_else(|| ProviderError::protocol("llm", format!("unknown LLM provider \"{provider}\"")))?;
        let base_url = env.get("CONFAB_LLM_BASE_URL").unwrap_or(default_url).to_string();
        if base_url.is_empty() {
            return Err(ProviderError::protocol(name, "set CONFAB_LLM_BASE_URL for the custom provider"));
        }
        let api_key = env.get(key_var).map(str::to_string);
        Ok(OpenAiCompatible::new(name, base_url, api_key, CallPolicy::default()))
    }

    fn body(&self, request: &ChatRequest) -> Value {
        let mut body = json!({
            "model": request.model,
            "messages": request.messages,
            "stream": true,
            "max_tokens": request.max_tokens,
            "temperature": request.temperature,
        });
        if !request.stop.is_empty() {
            body["stop"] = json!(request.stop);
        }
        if !request.tools.is_empty() {
            body["tools"] = request.tools.iter().map(|tool| json!({ "type": "function", "function": tool })).collect();
        }
        body
    }
}

type Sender = mpsc::Sender<Result<LlmEvent, ProviderError>>;

impl LanguageModel for OpenAiCompatible {
    fn stream(&self, request: ChatRequest) -> LlmStream {
        let (tx, rx) = mpsc::channel(LLM_STREAM_CAPACITY);
        let this = self.clone();
        let body = self.body(&request);
        tokio::spawn(async move {
            if let Err(err) = this.run(body, &tx).await {
                let _ = tx.send(Err(err)).await;
            }
        });
        rx
    }
}

/// Tool calls being assembled, by their `index` in the stream.
#[derive(Default)]
struct ToolCallAssembly {
    calls: BTreeMap<u64, ToolCall>,
}

impl ToolCallAssembly {
    fn add(&mut self, delta: &Value) {
        let index = delta["index"].as_u64().unwrap_or(0);
        let call = self.calls.entry(index).or_insert_with(|| ToolCall {
            id: String::new(),
            name: String::new(),
            arguments: String::new(),
        });
        if let Some(id) = delta["id"].as_str() {
            call.id = id.to_string();
        }
        if let Some(name) = delta["function"]["name"].as_str() {
            call.name.push_str(name);
        }
        if let Some(arguments) = delta["function"]["arguments"].as_str() {
            call.arguments.push_str(arguments);
        }
    }

    fn take(&mut self) -> Vec<ToolCall> {
        std::mem::take(&mut self.calls).into_values().collect()
    }
}

impl OpenAiCompatible {
    /// Sends the request (retrying only before any output), then relays the stream. Returns early,
    /// closing the connection, as soon as the receiver is dropped.
    async fn run(&self, body: Value, tx: &Sender) -> Result<(), ProviderError> {
        let started = Instant::now();
        let url = format!("{}/chat/completions", self.base_url);
        let mut attempts = 0;
        let response = loop {
            attempts += 1;
            let mut request = self.client.post(&url).json(&body);
            if let Some(key) = &self.api_key {
                request = request.bearer_auth(key);
            }
            let sent = tokio::select! {
                // Let go of (close) a request whose reply is no longer wanted, even before its headers.
                _ = tx.closed() => return Ok(()),
                sent = tokio::time::timeout(self.policy.first_byte_timeout, request.send()) => sent,
            };
            let error = match sent {
                Err(_) => ProviderError::network(self.provider, "timed out waiting for the response"),
                Ok(Err(err)) => ProviderError::network(self.provider, err.to_string()),
                Ok(Ok(response)) if response.status().is_success() => break response,
                Ok(Ok(response)) => {
                    let status = response.status().as_u16();
                    let text = response.text().await.unwrap_or_default();
                    ProviderError::from_status(self.provider, status, &text)
                }
            };
            let backoff = self.policy.backoff * 2u32.pow(attempts - 1);
            if !self.policy.retry_after(&error, attempts, started.elapsed(), backoff) {
                return Err(error);
            }
            tokio::select! {
                _ = tokio::time::sleep(backoff) => {}
                _ = tx.closed() => return Ok(()),
            }
        };

        let mut bytes = response.bytes_stream();
        let mut parser = SseParser::default();
        let mut tools = ToolCallAssembly::default();
        let mut metrics = CallMetrics { attempts, ..CallMetrics::default() };
        let mut payloads: Vec<String> = Vec::new();
        loop {
            let chunk = tokio::select! {
                _ = tx.closed() => return Ok(()),
                chunk = tokio::time::timeout(self.policy.idle_timeout, bytes.next()) => chunk,
            };
            match chunk {
                Err(_) => return Err(ProviderError::network(self.provider, "the stream stalled")),
                Ok(None) => {
                    return Err(ProviderError::network(self.provider, "the stream ended before [DONE]"));
                }
                Ok(Some(Err(err))) => {
                    return Err(ProviderError::network(self.provider, format!("the stream broke: {err}")));
                }
                Ok(Some(Ok(bytes))) => parser.push(&bytes, &mut |data| payloads.push(data.to_string())),
            }
            for data in payloads.drain(..) {
                if data == "[DONE]" {
                    for call in tools.take() {
                        send(tx, LlmEvent::ToolCall(call)).await?;
                    }
                    metrics.duration = started.elapsed();
                    send(tx, LlmEvent::Done { finish_reason: "stop".into(), metrics }).await?;
                    return Ok(());
                }
                let chunk: Value = serde_json::from_str(&data)
                    .map_err(|err| ProviderError::protocol(self.provider, format!("bad chunk {data:?}: {err}")))?;
                if let Some(error) = chunk.get("error") {
                    return Err(ProviderError::protocol(self.provider, format!("error in stream: {error}")));
                }
                let Some(choice) = chunk["choices"].get(0) else {
                    continue;
                };
                if let Some(text) = choice["delta"]["content"].as_str().filter(|t| !t.is_empty()) {
                    metrics.time_to_first.get_or_insert_with(|| started.elapsed());
                    send(tx, LlmEvent::Text(text.to_string())).await?;
                }
                if let Some(deltas) = choice["delta"]["tool_calls"].as_array() {
                    metrics.time_to_first.get_or_insert_with(|| started.elapsed());
                    deltas.iter().for_each(|delta| tools.add(delta));
                }
                if choice["finish_reason"].as_str() == Some("tool_calls") {
                    for call in tools.take() {
                        send(tx, LlmEvent::ToolCall(call)).await?;
                    }
                }
            }
        }
    }
}

/// Sends one event; a dropped receiver ends the call quietly.
async fn send(tx: &Sender, event: LlmEvent) -> Result<(), ProviderError> {
    tx.send(Ok(event)).await.map_err(|_| ProviderError::protocol("llm", "cancelled"))
}
