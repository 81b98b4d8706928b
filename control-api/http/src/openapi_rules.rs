//! The field rules of `validate` written into the OpenAPI document, so a client generated from it (or a
//! fuzzer such as schemathesis) knows what the server refuses: non-blank names, http(s) URLs, UUID ids,
//! enumerations. Each rule is declared from the same constant the server checks (the same regular
//! expression, the same list of values), never restated by hand.
//!
//! Rules a schema cannot state are not declared (they are listed in docs/api.md): that referenced records
//! exist, cross-field rules (`max_endpointing_delay` ≥ `min_endpointing_delay`, a tool's `required`
//! parameters among its `properties`, the local speech model given the provider, exactly one of `agent_id`
//! or `conversation_id`), and what an uploaded image holds.

use serde_json::{Value, json};

use confab_store::agent_config::{
    BACKCHANNELS, INTERRUPTABILITY, LLM_PROVIDERS, MAX_ENDPOINTING_DELAY_SECONDS, MAX_FALLBACKS, MAX_STAGE_SECONDS,
    NOISE_SUPPRESSION, OTHER_VOICES, STT_PROVIDERS, TTS_PROVIDERS, TURN_HANDLING,
};
use confab_store::agents::record::{MAX_AVATARS, MAX_CALL_DURATION_LIMIT_SECONDS};
use confab_store::records::knowledge_bases::MAX_DOCUMENT_CHARS;
use confab_store::validate::{
    FUNCTION_NAME_PATTERN, HTTP_URL_PATTERN, MAX_NAME_CHARS, MAX_TEXT_CHARS, MAX_URL_CHARS, NAME_PATTERN, TEXT_PATTERN,
    UUID_PATTERN,
};

/// Rust's `str::trim` white space (Unicode White_Space), as a character class body.
const TRIMMED: &str = r"\t\n\x0b\x0c\r \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000";

/// A pattern matching exactly the strings that, trimmed and ASCII-lowercased, are one of `values` (or
/// empty, when `empty_too`): what the server accepts where it normalises before comparing.
pub fn normalised_enum_pattern(values: &[&str], empty_too: bool) -> String {
    let any_case = |value: &str| -> String {
        value
            .chars()
            .map(|c| {
                if c.is_ascii_alphabetic() {
                    format!("[{}{}]", c.to_ascii_uppercase(), c.to_ascii_lowercase())
                } else {
                    regex::escape(&c.to_string())
                }
            })
            .collect()
    };
    let choices = values.iter().map(|value| any_case(value)).collect::<Vec<_>>().join("|");
    let optional = if empty_too { "?" } else { "" };
    format!("^[{TRIMMED}]*({choices}){optional}[{TRIMMED}]*$")
}

/// One of `values` exactly (`null` too where the field takes it: added by `merge`).
fn string_enum(values: &[&str]) -> Value {
    json!({ "enum": values })
}

fn url_rule(optional: bool) -> Value {
    let url = json!({ "maxLength": MAX_URL_CHARS, "pattern": HTTP_URL_PATTERN });
    if optional {
        // Empty means "none"; `maxLength: 0` rather than `^$`, which Python's `re` also matches on "\n".
        // No `type` in the branches: the property's own type says whether `null` is taken.
        json!({ "anyOf": [{ "maxLength": 0 }, url] })
    } else {
        url
    }
}

/// `(component schema, property, rule merged into the property's schema)`.
fn rules() -> Vec<(&'static str, &'static str, Value)> {
    let uuid_items = json!({ "items": { "type": "string", "pattern": UUID_PATTERN } });
    let events = json!({ "items": string_enum(&confab_engine::EVENT_NAMES) });
    let provider = |values: &[&str]| json!({ "pattern": normalised_enum_pattern(values, true) });
    let mut rules = vec![
        ("CreateAgent", "callback_url", url_rule(true)),
        ("CreateAgent", "callback_events", events.clone()),
        ("CreateAgentShort", "callback_url", url_rule(true)),
        ("CreateAgentShort", "callback_events", events),
        ("GuardrailInput", "callback_url", url_rule(true)),
        ("McpRequestConfig", "url", url_rule(false)),
        ("ToolRequestConfig", "url", url_rule(false)),
        ("McpFields", "type", string_enum(confab_store::records::mcp::MCP_TYPES)),
        ("ToolFields", "type", string_enum(confab_store::records::tools::TOOL_TYPES)),
        (
            "ToolRequestConfig",
            "method",
            json!({ "pattern": normalised_enum_pattern(confab_store::records::tools::METHODS, false) }),
        ),
        (
            "CreateCustomAvatar",
            "gender",
            json!({ "pattern": normalised_enum_pattern(crate::avatars::custom::GENDERS, false) }),
        ),
        (
            "ExternalMeetingRequest",
            "mode",
            json!({ "anyOf": [{ "maxLength": 0 }, { "enum": confab_store::meeting_mode::MODES }] }),
        ),
        ("LlmConfig", "provider", provider(LLM_PROVIDERS)),
        ("SttConfig", "provider", provider(STT_PROVIDERS)),
        ("TtsConfig", "provider", provider(TTS_PROVIDERS)),
        ("SttConfig", "turn_handling", string_enum(TURN_HANDLING)),
        ("SttConfig", "interruptability", string_enum(INTERRUPTABILITY)),
        ("SttConfig", "backchannels", string_enum(BACKCHANNELS)),
        ("SttConfig", "noise_suppression", string_enum(NOISE_SUPPRESSION)),
        ("SttConfig", "other_voices", string_enum(OTHER_VOICES)),
        (
            "AgentSettings",
            "maxCallDuration",
            json!({ "exclusiveMinimum": 0, "maximum": MAX_CALL_DURATION_LIMIT_SECONDS }),
        ),
        ("CreateAgent", "avatars", json!({ "maxItems": MAX_AVATARS })),
        // trugen-sdk sends `{}` when the caller gives no context; text is kept as given, an object as its JSON.
        (
            "AuthConversation",
            "context",
            json!({ "type": ["string", "object", "null"], "maxLength": confab_store::validate::MAX_TEXT_CHARS }),
        ),
        ("DocumentInput", "content", json!({ "pattern": *NAME_PATTERN })),
        ("FunctionSchema", "type", string_enum(&["function"])),
        ("FunctionSchema", "name", json!({ "pattern": FUNCTION_NAME_PATTERN })),
        ("FunctionParameters", "type", string_enum(&["object"])),
        ("SttConfig", "min_endpointing_delay", json!({ "minimum": 0, "maximum": MAX_ENDPOINTING_DELAY_SECONDS })),
        ("SttConfig", "max_endpointing_delay", json!({ "minimum": 0, "maximum": MAX_ENDPOINTING_DELAY_SECONDS })),
    ];
    let stage_seconds = json!({ "exclusiveMinimum": 0, "maximum": MAX_STAGE_SECONDS });
    for component in ["LlmConfig", "SttConfig", "TtsConfig"] {
        rules.push((component, "first_response_timeout", stage_seconds.clone()));
        rules.push((component, "hedge_after", stage_seconds.clone()));
        rules.push((component, "fallbacks", json!({ "maxItems": MAX_FALLBACKS })));
        rules.push((component, "endpoint", json!({ "pattern": "^[A-Za-z0-9._-]{1,64}$" })));
    }
    let name = json!({ "maxLength": MAX_NAME_CHARS });
    let text = json!({ "maxLength": MAX_TEXT_CHARS });
    for (component, property, limit) in [
        ("CreateAgent", "agent_system_prompt", &text),
        ("AgentSettings", "conversationalContext", &text),
        ("AgentAvatar", "persona_name", &name),
        ("LlmConfig", "model", &name),
        ("SttConfig", "model", &name),
        ("TtsConfig", "model_id", &name),
        ("TtsConfig", "voice_id", &name),
        ("TemplateFields", "system_prompt", &text),
        ("GuardrailInput", "prompt", &text),
        ("GuardrailInput", "category", &name),
        ("GuardrailInput", "response_message", &text),
        ("McpFields", "description", &text),
        ("KnowledgeBaseFields", "description", &text),
        ("DocumentInput", "title", &name),
        ("DocumentInput", "content", &json!({ "maxLength": MAX_DOCUMENT_CHARS })),
        ("FunctionSchema", "description", &text),
        ("CreateConversation", "user_name", &name),
        ("CreateConversation", "user_id", &name),
        ("CreateConversation", "context", &text),
        ("CreateSessionToken", "userName", &name),
        ("CreateSessionToken", "userId", &name),
        ("CreateSessionToken", "context", &text),
        ("ExternalMeetingRequest", "meeting_url", &text),
        ("ExternalMeetingRequest", "context", &text),
        ("ExternalMeetingRequest", "wake_phrase", &name),
        ("CreateCustomAvatar", "category", &name),
    ] {
        rules.push((component, property, limit.clone()));
    }
    for kind in ["knowledge_base_ids", "tool_ids", "guardrail_ids", "mcp_ids"] {
        rules.push(("Attachments", kind, uuid_items.clone()));
    }
    rules
}

/// Adds the rules to the component schemas and parameters of `document`, an OpenAPI document as JSON.
pub fn declare(document: &mut Value) {
    if let Some(schemas) = document.pointer_mut("/components/schemas").and_then(Value::as_object_mut) {
        for schema in schemas.values_mut() {
            name_rules(schema);
        }
        for schema in schemas.values_mut() {
            text_rules(schema);
        }
        for (component, property, rule) in rules() {
            let schema = schemas.get_mut(component).unwrap_or_else(|| panic!("no component schema {component}"));
            let mut applied = 0;
            for_each_property(schema, property, &mut |target| {
                merge(target, &rule);
                applied += 1;
            });
            assert!(applied > 0, "{component} has no property {property}");
        }
    }
    date_parameters(document);
    exactly_one_of(document, "CreateSessionToken", ["agent_id", "conversation_id"]);
    fallback_entries(document);
}

/// A stage's `fallbacks` are configurations of its shape less what belongs to the primary only (they do
/// not nest; turn-taking rides on the primary `stt`): each gets its own component (`LlmFallback`, …).
fn fallback_entries(document: &mut Value) {
    const PRIMARY_ONLY: [(&str, &str, &[&str]); 3] = [
        ("LlmConfig", "LlmFallback", &["fallbacks", "hedge_after", "preemptive_generation"]),
        (
            "SttConfig",
            "SttFallback",
            &[
                "fallbacks",
                "hedge_after",
                "min_endpointing_delay",
                "max_endpointing_delay",
                "turn_handling",
                "interruptability",
                "backchannels",
                "noise_suppression",
                "other_voices",
            ],
        ),
        ("TtsConfig", "TtsFallback", &["fallbacks", "hedge_after"]),
    ];
    let Some(schemas) = document.pointer_mut("/components/schemas").and_then(Value::as_object_mut) else { return };
    for (component, entry, primary_only) in PRIMARY_ONLY {
        let mut entry_schema = schemas[component].clone();
        if let Some(properties) = entry_schema.get_mut("properties").and_then(Value::as_object_mut) {
            primary_only.iter().for_each(|name| {
                properties.remove(*name);
            });
        }
        schemas.insert(entry.to_string(), entry_schema);
        let fallbacks = &mut schemas[component]["properties"]["fallbacks"];
        fallbacks["items"] = json!({ "$ref": format!("#/components/schemas/{entry}") });
    }
}

/// Exactly one of two nullable properties must be given (not null).
fn exactly_one_of(document: &mut Value, component: &str, properties: [&str; 2]) {
    let schema = document.pointer_mut(&format!("/components/schemas/{component}")).expect("the component exists");
    let given = |name: &str| json!({ "required": [name], "properties": { name: { "type": "string" } } });
    schema["oneOf"] = json!([given(properties[0]), given(properties[1])]);
}

/// `from`/`to` take a day, or nothing (an empty value means "no bound").
fn date_parameters(document: &mut Value) {
    let Some(paths) = document.get_mut("paths").and_then(Value::as_object_mut) else { return };
    for operation in paths.values_mut().filter_map(Value::as_object_mut).flat_map(|item| item.values_mut()) {
        let Some(parameters) = operation.get_mut("parameters").and_then(Value::as_array_mut) else { continue };
        for parameter in parameters {
            if parameter["schema"]["format"] == "date" {
                parameter["schema"] = json!({
                    "anyOf": [{ "type": "string", "maxLength": 0 }, { "type": "string", "format": "date" }]
                });
            }
        }
    }
}

/// Every other string the server reads holds no NUL (`TEXT_PATTERN`): plain string properties, and the
/// keys and values of string maps (such as request headers).
fn text_rules(schema: &mut Value) {
    match schema {
        Value::Object(fields) => {
            let is_string = match fields.get("type") {
                Some(Value::String(kind)) => kind == "string",
                Some(Value::Array(kinds)) => kinds.contains(&json!("string")),
                _ => false,
            };
            let constrained = ["pattern", "enum", "anyOf", "format"].iter().any(|key| fields.contains_key(*key));
            if is_string && !constrained {
                fields.insert("pattern".into(), json!(TEXT_PATTERN));
            }
            if fields.contains_key("propertyNames") {
                fields.insert("propertyNames".into(), json!({ "type": "string", "pattern": TEXT_PATTERN }));
            }
            fields.values_mut().for_each(text_rules);
        }
        Value::Array(items) => items.iter_mut().for_each(text_rules),
        _ => {}
    }
}

/// Every required name (declared `minLength` 1, `maxLength` `MAX_NAME_CHARS`) must hold more than blanks.
fn name_rules(schema: &mut Value) {
    match schema {
        Value::Object(fields) => {
            if fields.get("minLength") == Some(&json!(1)) && fields.get("maxLength") == Some(&json!(MAX_NAME_CHARS)) {
                fields.insert("pattern".into(), json!(*NAME_PATTERN));
            }
            fields.values_mut().for_each(name_rules);
        }
        Value::Array(items) => items.iter_mut().for_each(name_rules),
        _ => {}
    }
}

/// Calls `apply` on every schema of a property named `name` inside `schema` (through `allOf` and the like).
fn for_each_property(schema: &mut Value, name: &str, apply: &mut dyn FnMut(&mut Value)) {
    match schema {
        Value::Object(fields) => {
            if let Some(target) = fields.get_mut("properties").and_then(|p| p.get_mut(name)) {
                apply(target);
            }
            for (key, value) in fields.iter_mut() {
                if key != "properties" {
                    for_each_property(value, name, apply);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|item| for_each_property(item, name, apply)),
        _ => {}
    }
}

/// Merges `rule`'s keys into `target` (nested objects such as `items` key by key).
fn merge(target: &mut Value, rule: &Value) {
    let (Value::Object(target), Value::Object(rule)) = (target, rule) else { return };
    let nullable = target.get("type").and_then(Value::as_array).is_some_and(|types| types.contains(&json!("null")));
    for (key, value) in rule {
        if key == "enum" && nullable {
            let mut values = value.as_array().cloned().unwrap_or_default();
            values.push(Value::Null);
            target.insert(key.clone(), Value::Array(values));
            continue;
        }
        match target.get_mut(key) {
            Some(existing @ Value::Object(_)) if value.is_object() => merge(existing, value),
            _ => {
                target.insert(key.clone(), value.clone());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use regex::Regex;

    use super::*;

    #[test]
    fn normalised_enums_match_what_the_server_compares() {
        let pattern = Regex::new(&normalised_enum_pattern(&["male", "other"], false)).unwrap();
        for accepted in ["male", " Male\n", "OTHER", "\u{3000}other\t"] {
            assert!(pattern.is_match(accepted), "{accepted:?}");
        }
        for refused in ["", "mal", "males", "fe male", "\u{1f}male"] {
            assert!(!pattern.is_match(refused), "{refused:?}");
        }
        let optional = Regex::new(&normalised_enum_pattern(&["local"], true)).unwrap();
        assert!(optional.is_match("") && optional.is_match("  ") && optional.is_match("LOCAL"));
    }

    #[test]
    fn every_rule_lands_on_its_property() {
        // `declare` panics when a rule names a schema or property the document does not have.
        let value = crate::openapi();
        let gender = &value["components"]["schemas"]["CreateCustomAvatar"]["properties"]["gender"];
        assert!(gender["pattern"].as_str().unwrap().contains("[Mm][Aa][Ll][Ee]"), "{gender}");
    }
}
