//! Tool calls for the local models. The conversation goes to the model's own chat template as messages
//! ([`messages`]: the assistant's calls with their arguments as JSON objects, results as `tool` messages)
//! with the functions ([`functions`]); the template writes them as the model was trained to read them.
//! What comes back depends on the template's [`CallFormat`]: `<tool_call>{"name": …, "arguments": {…}}</tool_call>`
//! (Qwen, Hermes; Qwen2.5 sometimes writes the JSON without the tags) or a reply that is one JSON object
//! `{"name": …, "parameters": {…}}` (Llama 3.x).
//! [`CallScanner`] tells, while the reply streams, whether it is text to speak or tool calls to hold.

use std::sync::atomic::{AtomicU64, Ordering};

use confab_models::chat_lm::{CallFormat, Message, TemplateCall, ToolFunction};
use serde_json::{Value, json};

use super::llm::{ChatMessage, ToolCall, ToolSpec};

const OPEN: &str = "<tool_call>";
const CLOSE: &str = "</tool_call>";
/// Llama 3.1's marker before a call in its code-interpreter style.
const PYTHON_TAG: &str = "<|python_tag|>";

/// The functions as the template reads them.
pub fn functions(tools: &[ToolSpec]) -> Vec<ToolFunction> {
    tools
        .iter()
        .map(|tool| ToolFunction {
            name: tool.name.clone(),
            description: tool.description.clone(),
            parameters: tool.parameters.clone(),
        })
        .collect()
}

/// The conversation as the template reads it: each call's arguments as a JSON object (text that is not
/// JSON stays a string).
pub fn messages<'a>(messages: impl IntoIterator<Item = &'a ChatMessage>) -> Vec<Message> {
    messages
        .into_iter()
        .map(|message| Message {
            role: message.role.clone(),
            content: message.content.clone(),
            tool_calls: message
                .tool_calls
                .iter()
                .map(|call| TemplateCall {
                    name: call.name.clone(),
                    arguments: serde_json::from_str(&call.arguments)
                        .unwrap_or_else(|_| Value::String(call.arguments.clone())),
                })
                .collect(),
        })
        .collect()
}

/// Splits a streaming reply into text to speak at once and tool calls: a reply that begins as a call
/// does in the model's format (`<tool_call>`; for bare JSON calls `{` or `<|python_tag|>`) is held whole
/// and read as calls at its end; any other reply streams as it comes (only its first characters wait
/// while they could still begin a call).
pub struct CallScanner {
    format: CallFormat,
    held: String,
    state: State,
}

#[derive(Default, PartialEq)]
enum State {
    #[default]
    Undecided,
    Text,
    Calls,
}

impl CallScanner {
    pub fn new(format: CallFormat) -> CallScanner {
        CallScanner { format, held: String::new(), state: State::Undecided }
    }

    /// The openings a call may begin with in this format.
    fn openings(&self) -> &'static [&'static str] {
        match self.format {
            CallFormat::None => &[],
            // Qwen2.5 sometimes leaves out the tags (`finish`).
            CallFormat::Tagged => &[OPEN, "{"],
            CallFormat::BareJson => &["{", PYTHON_TAG],
        }
    }

    /// The text to speak now, if any.
    pub fn push(&mut self, piece: &str) -> Option<String> {
        if self.state == State::Text {
            return Some(piece.to_string());
        }
        self.held.push_str(piece);
        if self.state == State::Calls {
            return None;
        }
        let start = self.held.trim_start();
        let openings = self.openings();
        if openings.iter().any(|open| start.starts_with(open)) {
            self.state = State::Calls;
            None
        } else if start.is_empty() || openings.iter().any(|open| open.starts_with(start)) {
            None
        } else {
            self.state = State::Text;
            Some(std::mem::take(&mut self.held))
        }
    }

    /// At the reply's end: the text still held, and the calls read (ids unique in the process). Calls
    /// that are not JSON with a `name` are left out (and logged); so is the tag text. A bare-JSON reply
    /// that is no call after all is text.
    pub fn finish(self) -> (Option<String>, Vec<ToolCall>) {
        let text = |held: String| (Some(held).filter(|text| !text.trim().is_empty()), Vec::new());
        if self.state != State::Calls {
            return text(self.held);
        }
        // Qwen2.5 sometimes writes its call's JSON without the tags around it: read like Llama's.
        let bare = self.format == CallFormat::BareJson || !self.held.trim_start().starts_with(OPEN);
        let bodies: Vec<&str> = if bare {
            match bare_calls(&self.held) {
                Some(bodies) => bodies,
                None => return text(self.held),
            }
        } else {
            self.held.split(OPEN).skip(1).map(|block| block.split(CLOSE).next().unwrap_or_default().trim()).collect()
        };
        static NEXT_ID: AtomicU64 = AtomicU64::new(1);
        let mut calls = Vec::new();
        for body in bodies {
            match read_call(body) {
                Some((name, arguments)) => calls.push(ToolCall {
                    id: format!("local_call_{}", NEXT_ID.fetch_add(1, Ordering::Relaxed)),
                    name,
                    arguments: arguments.to_string(),
                }),
                None => tracing::warn!(call = body, "the local language model wrote a tool call that is not JSON"),
            }
        }
        (None, calls)
    }
}

/// The calls of a reply that is JSON alone (after Llama's `<|python_tag|>`, if any): one call, or several
/// separated by `;` (Llama 3.1's format for parallel calls). None when it is no call after all.
fn bare_calls(held: &str) -> Option<Vec<&str>> {
    let body = held.trim().trim_start_matches(PYTHON_TAG).trim();
    let parts: Vec<&str> = body.split(';').map(str::trim).filter(|b| !b.is_empty()).collect();
    if read_call(body).is_some() {
        Some(vec![body])
    } else if !parts.is_empty() && parts.iter().all(|part| read_call(part).is_some()) {
        Some(parts)
    } else {
        None
    }
}

/// A call's name and arguments from its JSON (`arguments` in Qwen's format, `parameters` in Llama's).
fn read_call(body: &str) -> Option<(String, Value)> {
    let call = serde_json::from_str::<Value>(body).ok()?;
    let name = call.get("name")?.as_str()?.to_string();
    let arguments = call.get("arguments").or_else(|| call.get("parameters")).cloned().unwrap_or_else(|| json!({}));
    Some((name, arguments))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool() -> ToolSpec {
        ToolSpec {
            name: "get_weather".into(),
            description: "The weather in a city".into(),
            parameters: json!({"type": "object", "properties": {"city": {"type": "string"}}}),
        }
    }

    #[test]
    fn calls_go_to_the_template_with_their_arguments_as_objects() {
        let call = ToolCall { id: "c1".into(), name: "get_weather".into(), arguments: r#"{"city":"Paris"}"#.into() };
        let broken = ToolCall { id: "c2".into(), name: "get_weather".into(), arguments: "Paris".into() };
        let written = messages(&[ChatMessage::tool_calls(vec![call, broken])]);
        assert_eq!(written[0].role, "assistant");
        assert_eq!(written[0].tool_calls[0].arguments, json!({"city": "Paris"}));
        assert_eq!(written[0].tool_calls[1].arguments, json!("Paris"));
        assert_eq!(functions(&[tool()])[0].name, "get_weather");
    }

    #[test]
    fn llama_replies_that_are_one_json_object_are_calls() {
        let mut scanner = CallScanner::new(CallFormat::BareJson);
        assert_eq!(scanner.push("{\"name\": \"get_weather\", "), None);
        assert_eq!(scanner.push("\"parameters\": {\"city\": \"Paris\"}}"), None);
        let (text, calls) = scanner.finish();
        assert_eq!(text, None);
        assert_eq!((calls[0].name.as_str(), calls[0].arguments.as_str()), ("get_weather", r#"{"city":"Paris"}"#));

        let mut scanner = CallScanner::new(CallFormat::BareJson);
        assert_eq!(scanner.push("{braces} are fine"), None);
        assert_eq!(scanner.finish(), (Some("{braces} are fine".into()), vec![]), "JSON that is no call is text");

        let mut scanner = CallScanner::new(CallFormat::None);
        assert_eq!(scanner.push("<tool_call>"), Some("<tool_call>".into()), "a model offered no tools only speaks");
    }

    #[test]
    fn a_reply_that_opens_with_the_tag_is_held_and_read_as_calls() {
        let mut scanner = CallScanner::new(CallFormat::Tagged);
        let pieces = [
            "<",
            "tool",
            "_call>\n{\"name\": \"get_weather\", ",
            "\"arguments\": {\"city\": \"Paris\"}}\n",
            "</tool_call>",
        ];
        for piece in pieces {
            assert_eq!(scanner.push(piece), None);
        }
        let (text, calls) = scanner.finish();
        assert_eq!(text, None);
        assert_eq!(calls.len(), 1);
        assert_eq!(calls[0].name, "get_weather");
        assert_eq!(calls[0].arguments, r#"{"city":"Paris"}"#);
        assert!(calls[0].id.starts_with("local_call_"));
    }

    #[test]
    fn other_replies_stream_and_only_a_possible_tag_waits() {
        let mut scanner = CallScanner::new(CallFormat::Tagged);
        assert_eq!(scanner.push("The"), Some("The".into()));
        assert_eq!(scanner.push(" sky"), Some(" sky".into()));
        assert_eq!(scanner.finish(), (None, vec![]));

        let mut scanner = CallScanner::new(CallFormat::Tagged);
        assert_eq!(scanner.push("<"), None, "could begin the tag");
        assert_eq!(scanner.push("3 is less"), Some("<3 is less".into()));

        let mut scanner = CallScanner::new(CallFormat::Tagged);
        assert_eq!(scanner.push("<tool"), None);
        assert_eq!(scanner.finish(), (Some("<tool".into()), vec![]), "a reply that ends undecided is text");
    }

    #[test]
    fn calls_that_are_not_json_are_left_out() {
        let mut scanner = CallScanner::new(CallFormat::Tagged);
        scanner.push("<tool_call>\nget_weather(Paris)\n</tool_call><tool_call>{\"name\": \"a\"}</tool_call>");
        let (text, calls) = scanner.finish();
        assert_eq!(text, None);
        assert_eq!(calls.len(), 1);
        assert_eq!((calls[0].name.as_str(), calls[0].arguments.as_str()), ("a", "{}"));
    }

    /// Qwen2.5-Coder-0.5B, greedy on llama.cpp, answers the weather question with the call's JSON alone.
    #[test]
    fn a_tagged_format_reply_that_is_the_call_without_its_tags_is_a_call() {
        let mut scanner = CallScanner::new(CallFormat::Tagged);
        for piece in ["{\"", "name", "\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}"] {
            assert_eq!(scanner.push(piece), None, "held while it could be a call");
        }
        let (text, calls) = scanner.finish();
        assert_eq!(text, None);
        assert_eq!((calls[0].name.as_str(), calls[0].arguments.as_str()), ("get_weather", r#"{"city":"Paris"}"#));

        let mut scanner = CallScanner::new(CallFormat::Tagged);
        scanner.push("{braces} are what I call these.");
        assert_eq!(
            scanner.finish(),
            (Some("{braces} are what I call these.".into()), vec![]),
            "no call after all: text"
        );
    }
}
