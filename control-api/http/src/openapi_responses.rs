//! What every operation of the OpenAPI document answers besides its own responses, filled in from one
//! place so the document cannot drift from the middleware that produces them: 401 wherever a key or token
//! is checked, 400 and 413 wherever a body or query is read, 500 on every `/v1` and `/v2` route; session
//! routes (`/v1/session/…`) take the conversation's session token as `Authorization: Bearer`, not the API
//! key, and `GET /`, `/openapi.json` and `/metrics` take nothing.

use utoipa::openapi::path::{HttpMethod, Operation};
use utoipa::openapi::security::SecurityRequirement;
use utoipa::openapi::{OpenApi, RefOr, Response};

/// Routes outside the API key's reach.
const PUBLIC: &[&str] = &["/", "/openapi.json", "/metrics"];

pub fn complete(openapi: &mut OpenApi) {
    for (path, item) in openapi.paths.paths.iter_mut() {
        let public = PUBLIC.contains(&path.as_str()) || path.starts_with("/join");
        let session = path.starts_with("/v1/session/");
        for method in [HttpMethod::Get, HttpMethod::Post, HttpMethod::Put, HttpMethod::Patch, HttpMethod::Delete] {
            let Some(operation) = operation_mut(item, &method) else { continue };
            if public {
                operation.security = Some(vec![SecurityRequirement::default()]);
                continue;
            }
            if session {
                operation.security = Some(vec![SecurityRequirement::new("session_token", Vec::<String>::new())]);
            }
            let reads_body = matches!(method, HttpMethod::Post | HttpMethod::Put | HttpMethod::Patch);
            let reads_query = operation
                .parameters
                .as_ref()
                .is_some_and(|p| p.iter().any(|p| matches!(p.parameter_in, utoipa::openapi::path::ParameterIn::Query)));
            let has_path_id = path.contains('{');
            add(operation, "401", "Missing, wrong or revoked key (or session token): `{error}`");
            if reads_body || reads_query || has_path_id {
                add(operation, "400", "Invalid request (body, query or id): `{error}` naming what is wrong");
            }
            if reads_body {
                add(operation, "413", "Request body too large");
            }
            add(operation, "500", "Storage failure: `{error}`");
        }
    }
}

fn operation_mut<'a>(item: &'a mut utoipa::openapi::path::PathItem, method: &HttpMethod) -> Option<&'a mut Operation> {
    match method {
        HttpMethod::Get => item.get.as_mut(),
        HttpMethod::Post => item.post.as_mut(),
        HttpMethod::Put => item.put.as_mut(),
        HttpMethod::Patch => item.patch.as_mut(),
        HttpMethod::Delete => item.delete.as_mut(),
        _ => None,
    }
}

fn add(operation: &mut Operation, status: &str, description: &str) {
    operation.responses.responses.entry(status.to_string()).or_insert_with(|| RefOr::T(Response::new(description)));
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_operation_declares_what_the_middleware_answers() {
        let api = serde_json::to_value(crate::openapi()).unwrap();
        let mut checked = 0;
        for (path, item) in api["paths"].as_object().unwrap() {
            for (method, operation) in item.as_object().unwrap() {
                let responses = operation["responses"].as_object().unwrap();
                if ["/", "/openapi.json", "/metrics"].contains(&path.as_str()) {
                    continue;
                }
                checked += 1;
                assert!(responses.contains_key("401"), "{method} {path} lacks 401");
                if matches!(method.as_str(), "post" | "put" | "patch") {
                    assert!(responses.contains_key("413"), "{method} {path} lacks 413");
                    assert!(responses.contains_key("400"), "{method} {path} lacks 400");
                }
                let security = &operation["security"];
                if path.starts_with("/v1/session/") {
                    assert_eq!(security, &serde_json::json!([{ "session_token": [] }]), "{method} {path}");
                } else {
                    assert!(security.is_null(), "{method} {path} uses the document's API key: {security}");
                }
                for parameter in operation["parameters"].as_array().into_iter().flatten() {
                    let name = parameter["name"].as_str().unwrap();
                    if parameter["in"] == "path" {
                        assert!(path.contains(&format!("{{{name}}}")), "{method} {path}: {name} is not in the path");
                    }
                }
            }
        }
        assert!(checked > 40, "{checked} operations");
    }

    /// Clients generated from the document (and schemathesis) learn the name rules `validate` enforces.
    #[test]
    fn required_names_declare_their_length_rules() {
        let api = serde_json::to_value(crate::openapi()).unwrap();
        let schemas = &api["components"]["schemas"];
        let property = |schema: &str, name: &str| {
            let schema = &schemas[schema];
            let parts = schema["allOf"].as_array().cloned().unwrap_or_else(|| vec![schema.clone()]);
            parts.iter().find_map(|part| part["properties"].get(name).cloned()).unwrap_or_default()
        };
        for (schema, name) in [
            ("CreateAgent", "agent_name"),
            ("CreateAgentShort", "name"),
            ("AgentAvatar", "avatar_key_id"),
            ("TemplateFields", "name"),
            ("GuardrailInput", "name"),
            ("KnowledgeBaseFields", "name"),
            ("McpFields", "name"),
            ("CreateCustomAvatar", "name"),
            ("ExternalMeetingRequest", "user_name"),
            ("ExternalMeetingRequest", "user_id"),
        ] {
            let declared = property(schema, name);
            assert_eq!(declared["minLength"], 1, "{schema}.{name}: {declared}");
            assert_eq!(declared["maxLength"], confab_store::validate::MAX_NAME_CHARS, "{schema}.{name}: {declared}");
        }
    }

    /// Fields that take `null` as "left out" say so (`type: [..., "null"]`).
    #[test]
    fn fields_that_take_null_are_declared_nullable() {
        let api = serde_json::to_value(crate::openapi()).unwrap();
        let schemas = &api["components"]["schemas"];
        for (schema, name) in [
            ("CreateAgentShort", "system_prompt"),
            ("AgentSettings", "maxCallDuration"),
            ("CreateConversation", "meta_data"),
        ] {
            let declared = &schemas[schema]["properties"][name];
            let nullable = declared["type"].as_array().is_some_and(|types| types.contains(&"null".into()))
                || declared["oneOf"].as_array().is_some_and(|any| any.iter().any(|s| s["type"] == "null"));
            assert!(nullable, "{schema}.{name}: {declared}");
        }
    }
}
