//! Reading an agent's actions: names, order, and records that cannot be used.

use serde_json::json;

use super::*;

fn spec(agent: serde_json::Value) -> ActionsSpec {
    serde_json::from_value(agent).unwrap()
}

#[test]
fn reads_tools_and_guardrails_from_the_agent() {
    let agent = json!({
        "tool": [
            { "type": "tool.api", "schema": { "name": "lookup" }, "request_config": { "method": "GET", "url": "https://x.example/l" } },
            { "type": "tool.api", "schema": { "name": "lookup" }, "request_config": { "method": "GET", "url": "https://y.example/l" } }
        ],
        "guardrail": [ { "id": "g", "key": "no_politics", "name": "No politics", "prompt": "Politics." }, { "key": "lookup" } ],
    });
    let actions = Actions::from_agent(&spec(agent), ActionSettings::default()).unwrap();
    let names: Vec<String> = actions.specs().into_iter().map(|spec| spec.name).collect();
    assert_eq!(names, ["no_politics", "lookup"]);
    assert!(matches!(actions.find("lookup"), Some(Action::Tool(tool)) if tool.url == "https://x.example/l"));
    assert!(matches!(actions.find("no_politics"), Some(Action::Guardrail(_))));
    assert!(Actions::from_agent(&spec(json!({})), ActionSettings::default()).unwrap().is_empty());
}

#[test]
fn a_record_that_cannot_be_used_is_refused_not_skipped() {
    let agent = json!({ "tool": [
        { "type": "tool.api", "schema": { "name": "lookup" }, "request_config": { "method": "GET", "url": "https://x.example/l" } },
        { "type": "tool.api", "schema": { "name": "broken" } }
    ] });
    let refused = Actions::from_agent(&spec(agent), ActionSettings::default()).err().unwrap();
    assert_eq!(refused, MalformedAction { field: "tool", index: 1, needs: TOOL_NEEDS });
    assert_eq!(
        refused.to_string(),
        "the agent's tool[1] cannot be used: it needs type \"tool.api\", schema.name, request_config.url and request_config.method"
    );
    let no_url = json!({ "mcp": [{ "name": "docs", "request_config": {} }] });
    assert_eq!(Actions::from_agent(&spec(no_url), ActionSettings::default()).err().unwrap().field, "mcp");
}
