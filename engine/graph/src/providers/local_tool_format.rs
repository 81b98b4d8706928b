//! Tool calls for the embedded Qwen model, in the format of its own chat template (Qwen2.5's, the Hermes
//! style): the functions are listed in the system message inside `<tools></tools>`, the model calls one by
//! answering `<tool_call>{"name": …, "arguments": {…}}</tool_call>`, the calls it made are written back
//! that way in its turn, and their results go in one user turn, each inside `<tool_response>`.
//! [`CallScanner`] tells, while the reply streams, whether it is text to speak or tool calls to hold.

use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::{Value, json};

use super::llm::{ChatMessage, ToolCall, ToolSpec};

const OPEN: &str = "<tool_call>";
const CLOSE: &str = "</tool_call>";

/// The system message with the tools section the template adds.
fn system_with_tools(system: &str, tools: &[ToolSpec]) -> String {
    let mut text = format!(
        "{system}\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n\
         You are provided with function signatures within <tools></tools> XML tags:\n<tools>"
    );
    for tool in tools {
        // In the template's key order (its `tojson` keeps the order it was given).
        let (name, description) = (Value::String(tool.name.clone()), Value::String(tool.description.clone()));
        text.push_str(&format!(
            "\n{{\"type\": \"function\", \"function\": {{\"name\": {name}, \"description\": {description}, \"parameters\": {}}}}}",
            tool.parameters
        ));
    }
    text.push_str(
        "\n</tools>\n\nFor each function call, return a json object with function name and arguments within \
         <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": \
         <args-json-object>}\n</tool_call>",
    );
    text
}

/// A call as the model writes it.
fn written_call(call: &ToolCall) -> String {
    let arguments = serde_json::from_str::<Value>(&call.arguments).unwrap_or(Value::String(call.arguments.clone()));
    format!("{OPEN}\n{{\"name\": {}, \"arguments\": {arguments}}}\n{CLOSE}", Value::String(call.name.clone()))
}

/// The conversation as (role, content) turns of the template: tools in the first system message, the
/// assistant's calls written out, consecutive tool results in one user turn.
pub fn turns<'a>(messages: impl IntoIterator<Item = &'a ChatMessage>, tools: &[ToolSpec]) -> Vec<(String, String)> {
    let mut turns: Vec<(String, String)> = Vec::new();
    let mut previous_was_tool = false;
    for (index, message) in messages.into_iter().enumerate() {
        let is_tool = message.role == "tool";
        if is_tool {
            let response = format!("<tool_response>\n{}\n</tool_response>", message.content);
            match turns.last_mut() {
                Some((_, content)) if previous_was_tool => {
                    content.push('\n');
                    content.push_str(&response);
                }
                _ => turns.push(("user".into(), response)),
            }
        } else if index == 0 && message.role == "system" && !tools.is_empty() {
            turns.push(("system".into(), system_with_tools(&message.content, tools)));
        } else if message.role == "assistant" && !message.tool_calls.is_empty() {
            let mut parts: Vec<String> = Vec::new();
            if !message.content.is_empty() {
                parts.push(message.content.clone());
            }
            parts.extend(message.tool_calls.iter().map(written_call));
            turns.push(("assistant".into(), parts.join("\n")));
        } else {
            turns.push((message.role.clone(), message.content.clone()));
        }
        previous_was_tool = is_tool;
    }
    turns
}

/// Splits a streaming reply into text to speak at once and tool calls: a reply that begins with
/// `<tool_call>` is held whole and read as calls at its end; any other reply streams as it comes (only
/// its first characters wait while they could still begin the tag).
#[derive(Default)]
pub struct CallScanner {
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
        if start.starts_with(OPEN) {
            self.state = State::Calls;
            None
        } else if start.is_empty() || OPEN.starts_with(start) {
            None
        } else {
            self.state = State::Text;
            Some(std::mem::take(&mut self.held))
        }
    }

    /// At the reply's end: the text still held, and the calls read (ids unique in the process). Calls
    /// that are not JSON with a `name` are left out (and logged); so is the tag text.
    pub fn finish(self) -> (Option<String>, Vec<ToolCall>) {
        if self.state != State::Calls {
            return (Some(self.held).filter(|text| !text.trim().is_empty()), Vec::new());
        }
        static NEXT_ID: AtomicU64 = AtomicU64::new(1);
        let mut calls = Vec::new();
        for block in self.held.split(OPEN).skip(1) {
            let body = block.split(CLOSE).next().unwrap_or_default().trim();
            let parsed: Option<(String, Value)> = serde_json::from_str::<Value>(body).ok().and_then(|call| {
                let name = call.get("name")?.as_str()?.to_string();
                Some((name, call.get("arguments").cloned().unwrap_or_else(|| json!({}))))
            });
            match parsed {
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
    fn the_conversation_is_written_as_the_template_writes_it() {
        let call = ToolCall { id: "c1".into(), name: "get_weather".into(), arguments: r#"{"city":"Paris"}"#.into() };
        let messages = vec![
            ChatMessage::new("system", "Be brief."),
            ChatMessage::new("user", "Weather in Paris?"),
            ChatMessage::tool_calls(vec![call.clone(), ToolCall { id: "c2".into(), ..call }]),
            ChatMessage::tool_result("c1", &json!({"sky": "sunny"})),
            ChatMessage::tool_result("c2", &json!("21 C")),
        ];
        let turns = turns(&messages, &[tool()]);
        let roles: Vec<&str> = turns.iter().map(|(role, _)| role.as_str()).collect();
        assert_eq!(roles, ["system", "user", "assistant", "user"]);
        assert!(turns[0].1.starts_with("Be brief.\n\n# Tools\n\n"), "{}", turns[0].1);
        assert!(turns[0].1.contains(
            "<tools>\n{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"The weather in a city\", \"parameters\": {"
        ));
        assert!(turns[0].1.ends_with("<args-json-object>}\n</tool_call>"));
        let written = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\":\"Paris\"}}\n</tool_call>";
        assert_eq!(turns[2].1, format!("{written}\n{written}"));
        assert_eq!(
            turns[3].1,
            "<tool_response>\n{\"sky\":\"sunny\"}\n</tool_response>\n<tool_response>\n\"21 C\"\n</tool_response>"
        );
        // Without tools the system message is left as it is.
        assert_eq!(super::turns(&messages[..2], &[])[0].1, "Be brief.");
    }

    #[test]
    fn a_reply_that_opens_with_the_tag_is_held_and_read_as_calls() {
        let mut scanner = CallScanner::default();
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
        let mut scanner = CallScanner::default();
        assert_eq!(scanner.push("The"), Some("The".into()));
        assert_eq!(scanner.push(" sky"), Some(" sky".into()));
        assert_eq!(scanner.finish(), (None, vec![]));

        let mut scanner = CallScanner::default();
        assert_eq!(scanner.push("<"), None, "could begin the tag");
        assert_eq!(scanner.push("3 is less"), Some("<3 is less".into()));

        let mut scanner = CallScanner::default();
        assert_eq!(scanner.push("<tool"), None);
        assert_eq!(scanner.finish(), (Some("<tool".into()), vec![]), "a reply that ends undecided is text");
    }

    #[test]
    fn calls_that_are_not_json_are_left_out() {
        let mut scanner = CallScanner::default();
        scanner.push("<tool_call>\nget_weather(Paris)\n</tool_call><tool_call>{\"name\": \"a\"}</tool_call>");
        let (text, calls) = scanner.finish();
        assert_eq!(text, None);
        assert_eq!(calls.len(), 1);
        assert_eq!((calls[0].name.as_str(), calls[0].arguments.as_str()), ("a", "{}"));
    }
}
