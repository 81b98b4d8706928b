//! The chat template a GGUF carries (`tokenizer.chat_template`, a Jinja template as in Hugging Face's
//! `tokenizer_config.json`), rendered with minijinja the way `transformers` renders it: `messages`,
//! `tools`, `add_generation_prompt`, `bos_token`/`eos_token`, `raise_exception`, `strftime_now`, Python's
//! string methods, and `tojson` with Python's separators (`", "`, `": "`), which is what the models saw in
//! training. A GGUF without a template is prompted in ChatML (llama.cpp's fallback too).
//!
//! How a model calls tools follows from its template: one that writes `<tool_call>` (Qwen2.5, Qwen3,
//! Hermes) is read as tagged calls; one that asks for `"parameters"` in a JSON object (Llama 3.1–3.3) as
//! a bare JSON call; a template that never looks at `tools` gets none.

use minijinja::value::{Kwargs, ValueKind};
use minijinja::{Environment, Error, ErrorKind, Value};
use serde::Serialize;

use super::fail;
use crate::ModelError;

/// ChatML, for a GGUF that names no template.
const CHATML: &str = "{%- for message in messages %}{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}{%- endfor %}{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}";

/// How a model writes the tool calls its template asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallFormat {
    /// The template never reads `tools`: the model is offered none.
    None,
    /// `<tool_call>{"name": …, "arguments": {…}}</tool_call>` (Qwen2.5, Qwen3, Hermes).
    Tagged,
    /// The whole reply is `{"name": …, "parameters": {…}}` (Llama 3.1–3.3).
    BareJson,
}

/// A call the assistant made, as the template reads it (`message.tool_calls[i].function`).
#[derive(Debug, Clone, Serialize)]
pub struct TemplateCall {
    pub name: String,
    /// The arguments as a JSON object (templates write them with `tojson`).
    pub arguments: serde_json::Value,
}

/// One message of the conversation as the template reads it.
#[derive(Debug, Clone, Default)]
pub struct Message {
    pub role: String,
    pub content: String,
    pub tool_calls: Vec<TemplateCall>,
}

impl Message {
    pub fn new(role: &str, content: &str) -> Message {
        Message { role: role.into(), content: content.into(), tool_calls: Vec::new() }
    }
}

/// A function the model may call, as the template reads it (`{"type": "function", "function": {…}}`).
#[derive(Debug, Clone, Serialize)]
pub struct ToolFunction {
    pub name: String,
    pub description: String,
    pub parameters: serde_json::Value,
}

#[derive(Serialize)]
struct TemplateTool<'a> {
    r#type: &'static str,
    function: &'a ToolFunction,
}

#[derive(Serialize)]
struct TemplateToolCall<'a> {
    r#type: &'static str,
    function: &'a TemplateCall,
}

#[derive(Serialize)]
struct TemplateMessage<'a> {
    role: &'a str,
    content: &'a str,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tool_calls: Vec<TemplateToolCall<'a>>,
}

/// A GGUF's chat template, ready to render.
pub struct ChatTemplate {
    env: Environment<'static>,
    bos: String,
    eos: String,
    call_format: CallFormat,
    /// Whether the template is the GGUF's own (false: the ChatML fallback).
    own: bool,
}

impl ChatTemplate {
    /// The template `source` (None: ChatML), with the GGUF's beginning and end tokens' text.
    /// Err: why the template cannot be used.
    pub fn new(source: Option<&str>, bos: &str, eos: &str) -> Result<ChatTemplate, String> {
        let own = source.is_some_and(|s| !s.trim().is_empty());
        let text = if own { source.unwrap_or(CHATML) } else { CHATML };
        let mut env = Environment::new();
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        env.set_trim_blocks(true);
        env.set_lstrip_blocks(true);
        env.add_filter("tojson", python_json);
        env.add_function("raise_exception", |message: String| -> Result<Value, Error> {
            Err(Error::new(ErrorKind::InvalidOperation, message))
        });
        env.add_function("strftime_now", strftime_now);
        env.add_template_owned("chat", text.to_string())
            .map_err(|err| format!("its chat template does not compile: {err}"))?;
        let call_format = if !text.contains("tools") {
            CallFormat::None
        } else if text.contains("<tool_call>") {
            CallFormat::Tagged
        } else if text.contains("\"parameters\"") {
            CallFormat::BareJson
        } else {
            CallFormat::None
        };
        Ok(ChatTemplate { env, bos: bos.into(), eos: eos.into(), call_format, own })
    }

    /// How the model writes tool calls (None: it is offered no tools).
    pub fn call_format(&self) -> CallFormat {
        self.call_format
    }

    /// Whether the template came from the GGUF (false: ChatML, its own being absent).
    pub fn is_own(&self) -> bool {
        self.own
    }

    /// The prompt for `messages` (and `tools`, when the model calls tools), ending where the assistant's
    /// reply begins when `add_generation_prompt`.
    pub fn render(
        &self,
        messages: &[Message],
        tools: &[ToolFunction],
        add_generation_prompt: bool,
    ) -> Result<String, ModelError> {
        let messages: Vec<TemplateMessage> = messages
            .iter()
            .map(|m| TemplateMessage {
                role: &m.role,
                content: &m.content,
                tool_calls: m
                    .tool_calls
                    .iter()
                    .map(|call| TemplateToolCall { r#type: "function", function: call })
                    .collect(),
            })
            .collect();
        let tools: Vec<TemplateTool> = if self.call_format == CallFormat::None {
            Vec::new()
        } else {
            tools.iter().map(|function| TemplateTool { r#type: "function", function }).collect()
        };
        let template = self.env.get_template("chat").map_err(fail)?;
        let context = minijinja::context! {
            messages => Value::from_serialize(&messages),
            tools => if tools.is_empty() { Value::from(()) } else { Value::from_serialize(&tools) },
            add_generation_prompt => add_generation_prompt,
            // Qwen3 thinks aloud before answering unless told not to: a voice agent must answer at once.
            enable_thinking => false,
            bos_token => self.bos.as_str(),
            eos_token => self.eos.as_str(),
        };
        template.render(context).map_err(|err| fail(format!("its chat template failed: {err:#}")))
    }
}

/// `tojson` as `transformers` defines it: `json.dumps(value, ensure_ascii=False)`, keys in the given
/// order, `", "` and `": "` between items (and `indent` honoured).
fn python_json(value: Value, indent: Option<usize>, options: Kwargs) -> Result<Value, Error> {
    let indent = match indent {
        Some(width) => Some(width),
        None => options.get::<Option<usize>>("indent")?,
    };
    // Accepted as `json.dumps` takes them; the output is as `transformers` writes it either way.
    let _ = options.get::<Option<Value>>("ensure_ascii")?;
    let _ = options.get::<Option<Value>>("sort_keys")?;
    let mut out = String::new();
    write_json(&value, indent, 0, &mut out)?;
    Ok(Value::from_safe_string(out))
}

fn write_json(value: &Value, indent: Option<usize>, depth: usize, out: &mut String) -> Result<(), Error> {
    let newline = |out: &mut String, depth: usize| {
        if let Some(width) = indent {
            out.push('\n');
            out.push_str(&" ".repeat(width * depth));
        }
    };
    let separator = if indent.is_some() { "," } else { ", " };
    let quoted = |text: &str| serde_json::Value::String(text.to_string()).to_string();
    match value.kind() {
        ValueKind::Map => {
            out.push('{');
            let keys: Vec<Value> = value.try_iter()?.collect();
            for (i, key) in keys.iter().enumerate() {
                out.push_str(if i > 0 { separator } else { "" });
                newline(out, depth + 1);
                out.push_str(&quoted(&key.to_string()));
                out.push_str(": ");
                write_json(&value.get_item(key)?, indent, depth + 1, out)?;
            }
            if !keys.is_empty() {
                newline(out, depth);
            }
            out.push('}');
        }
        ValueKind::Seq | ValueKind::Iterable => {
            out.push('[');
            let items: Vec<Value> = value.try_iter()?.collect();
            for (i, item) in items.iter().enumerate() {
                out.push_str(if i > 0 { separator } else { "" });
                newline(out, depth + 1);
                write_json(item, indent, depth + 1, out)?;
            }
            if !items.is_empty() {
                newline(out, depth);
            }
            out.push(']');
        }
        ValueKind::Undefined | ValueKind::None => out.push_str("null"),
        ValueKind::String => out.push_str(&quoted(value.as_str().unwrap_or_default())),
        ValueKind::Bool | ValueKind::Number => out.push_str(&value.to_string()),
        _ => out.push_str(&quoted(&value.to_string())),
    }
    Ok(())
}

/// `strftime_now(format)` (Llama 3.2's template dates its system message): today, UTC, for the formats
/// templates use (`%d`, `%b`, `%B`, `%Y`, `%m`).
fn strftime_now(format: String) -> String {
    const MONTHS: [&str; 12] = [
        "January",
        "February",
        "March",
        "April",
        "May",
        "June",
        "July",
        "August",
        "September",
        "October",
        "November",
        "December",
    ];
    let days = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() / 86_400);
    let (year, month, day) = civil_from_days(days as i64);
    let month_name = MONTHS[(month - 1) as usize];
    format
        .replace("%d", &format!("{day:02}"))
        .replace("%m", &format!("{month:02}"))
        .replace("%Y", &year.to_string())
        .replace("%B", month_name)
        .replace("%b", &month_name[..3])
}

/// Year, month (1–12) and day of the month of a count of days since 1970-01-01 (Howard Hinnant's
/// algorithm).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Qwen2.5's template, as its GGUFs carry it (abridged to what the tests render: tools and calls).
    const QWEN: &str = r#"{%- if tools %}
    {{- '<|im_start|>system\n' }}
    {%- if messages[0]['role'] == 'system' %}
        {{- messages[0]['content'] }}
    {%- else %}
        {{- 'You are Qwen, created by Alibaba Cloud. You are a helpful assistant.' }}
    {%- endif %}
    {{- "\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>" }}
    {%- for tool in tools %}
        {{- "\n" }}
        {{- tool | tojson }}
    {%- endfor %}
    {{- "\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n" }}
{%- else %}
    {%- if messages[0]['role'] == 'system' %}
        {{- '<|im_start|>system\n' + messages[0]['content'] + '<|im_end|>\n' }}
    {%- endif %}
{%- endif %}
{%- for message in messages %}
    {%- if (message.role == "user") or (message.role == "system" and not loop.first) or (message.role == "assistant" and not message.tool_calls) %}
        {{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>' + '\n' }}
    {%- elif message.role == "assistant" %}
        {{- '<|im_start|>' + message.role }}
        {%- if message.content %}
            {{- '\n' + message.content }}
        {%- endif %}
        {%- for tool_call in message.tool_calls %}
            {%- if tool_call.function is defined %}
                {%- set tool_call = tool_call.function %}
            {%- endif %}
            {{- '\n<tool_call>\n{"name": "' }}
            {{- tool_call.name }}
            {{- '", "arguments": ' }}
            {{- tool_call.arguments | tojson }}
            {{- '}\n</tool_call>' }}
        {%- endfor %}
        {{- '<|im_end|>\n' }}
    {%- elif message.role == "tool" %}
        {%- if (loop.index0 == 0) or (messages[loop.index0 - 1].role != "tool") %}
            {{- '<|im_start|>user' }}
        {%- endif %}
        {{- '\n<tool_response>\n' }}
        {{- message.content }}
        {{- '\n</tool_response>' }}
        {%- if loop.last or (messages[loop.index0 + 1].role != "tool") %}
            {{- '<|im_end|>\n' }}
        {%- endif %}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\n' }}
{%- endif %}
"#;

    fn weather() -> ToolFunction {
        ToolFunction {
            name: "get_weather".into(),
            description: "The weather in a city".into(),
            parameters: serde_json::json!({"type": "object", "properties": {"city": {"type": "string"}}}),
        }
    }

    #[test]
    fn chatml_is_the_fallback() {
        let template = ChatTemplate::new(None, "", "").unwrap();
        let prompt = template.render(&[Message::new("system", "Be brief."), Message::new("user", "Hi")], &[], true);
        assert_eq!(
            prompt.unwrap(),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
        );
        assert_eq!(template.call_format(), CallFormat::None);
        assert!(!template.is_own());
    }

    #[test]
    fn qwen_template_writes_tools_calls_and_results_as_qwen_was_trained() {
        let template = ChatTemplate::new(Some(QWEN), "", "<|im_end|>").unwrap();
        assert_eq!(template.call_format(), CallFormat::Tagged);
        let call = Message {
            role: "assistant".into(),
            content: String::new(),
            tool_calls: vec![TemplateCall {
                name: "get_weather".into(),
                arguments: serde_json::json!({"city": "Paris"}),
            }],
        };
        let messages = [
            Message::new("system", "Be brief."),
            Message::new("user", "Weather in Paris?"),
            call,
            Message::new("tool", "{\"temp\": 21}"),
        ];
        let prompt = template.render(&messages, &[weather()], true).unwrap();
        let tools_line = "\n<tools>\n{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"The weather in a city\", \"parameters\": {\"properties\": {\"city\": {\"type\": \"string\"}}, \"type\": \"object\"}}}\n</tools>";
        assert!(prompt.starts_with("<|im_start|>system\nBe brief.\n\n# Tools\n"), "{prompt}");
        assert!(prompt.contains(tools_line), "{prompt}");
        assert!(
            prompt.ends_with(
                "<|im_start|>user\nWeather in Paris?<|im_end|>\n<|im_start|>assistant\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call><|im_end|>\n<|im_start|>user\n<tool_response>\n{\"temp\": 21}\n</tool_response><|im_end|>\n<|im_start|>assistant\n"
            ),
            "{prompt}"
        );
    }

    #[test]
    fn a_template_that_raises_says_why() {
        let template =
            ChatTemplate::new(Some("{{ raise_exception('Conversation roles must alternate') }}"), "", "").unwrap();
        let err = template.render(&[Message::new("user", "Hi")], &[], true).unwrap_err();
        assert!(err.to_string().contains("Conversation roles must alternate"), "{err}");
    }

    #[test]
    fn a_template_that_does_not_compile_is_refused() {
        let err = ChatTemplate::new(Some("{% for m in messages %}"), "", "").err().expect("refused");
        assert!(err.contains("does not compile"), "{err}");
    }

    #[test]
    fn llama_style_templates_ask_for_bare_json_calls() {
        let source = r#"{{- bos_token }}{%- if tools %}Given the following functions, respond with a JSON for a function call with its proper arguments. Respond in the format {"name": function name, "parameters": dictionary of argument name and its value}.{% for t in tools %}{{ t | tojson(indent=4) }}{% endfor %}{% endif %}{% for m in messages %}<|start_header_id|>{{ m.role }}<|end_header_id|>

{{ m.content | trim }}<|eot_id|>{% endfor %}{% if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>

{% endif %}"#;
        let template = ChatTemplate::new(Some(source), "<|begin_of_text|>", "<|eot_id|>").unwrap();
        assert_eq!(template.call_format(), CallFormat::BareJson);
        let prompt = template.render(&[Message::new("user", " Hi ")], &[weather()], true).unwrap();
        assert!(prompt.starts_with("<|begin_of_text|>Given the following functions"), "{prompt}");
        assert!(
            prompt.contains("{\n    \"type\": \"function\",\n    \"function\": {\n        \"name\": \"get_weather\""),
            "{prompt}"
        );
        assert!(prompt.ends_with("<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"), "{prompt}");
    }

    #[test]
    fn dates_for_templates_that_ask_for_today() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(20_784), (2026, 11, 27));
        assert_eq!(strftime_now("%d %b %Y".into()).len(), 11);
    }
}
