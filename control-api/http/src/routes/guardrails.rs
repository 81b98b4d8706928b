//! Guardrails: rules the agent's language model checks a user's message against. Owns the permanent
//! `key` derivation (lowercase, every non-alphanumeric character to `_`, `_2`, `_3`… on collision).

use axum::Json;
use axum::extract::{Path, State};

use serde_json::{Value, json};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::AppState;
use crate::extract::ApiQuery;
use crate::extract::{ApiJson, parse_id};
use crate::pagination::{PageQuery, with_total};
use confab_store::StoredRecord;
use confab_store::collection::GUARDRAILS;
use confab_store::error::{ApiError, ApiResult};
use confab_store::records::guardrails::{
    Guardrail, GuardrailFields, GuardrailInput, base_key, release_key, release_keys_of, reserve_key, to_guardrail,
};
use confab_store::validate;

const NOT_FOUND: &str = "Guardrail not found";

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(create_guardrail, list_guardrails)).routes(routes!(
        get_guardrail,
        replace_guardrail,
        delete_guardrail
    ))
}

fn validated(input: GuardrailInput, key: String) -> ApiResult<GuardrailFields> {
    validate::required_name("name", &input.name)?;
    let prompt = input.prompt.unwrap_or_default();
    validate::max_chars("prompt", &prompt, validate::MAX_TEXT_CHARS)?;
    let category = input.category.unwrap_or_default();
    validate::max_chars("category", &category, validate::MAX_NAME_CHARS)?;
    let response_message = input.response_message.unwrap_or_default();
    validate::max_chars("response_message", &response_message, validate::MAX_TEXT_CHARS)?;
    let callback_url = input.callback_url.unwrap_or_default();
    validate::optional_http_url("callback_url", &callback_url)?;
    Ok(GuardrailFields { key, name: input.name, category, prompt, response_message, callback_url })
}

/// Create a guardrail; its `key` is derived from the name once and never changes.
#[utoipa::path(post, path = "/v1/ext/guardrail", tag = "guardrails", request_body = GuardrailInput,
    responses((status = 200, description = "`{id, key, message: \"Guardrail created\"}`"), (status = 400), (status = 401)))]
async fn create_guardrail(
    State(state): State<AppState>,
    ApiJson(input): ApiJson<GuardrailInput>,
) -> ApiResult<Json<Value>> {
    let failed = ApiError::internal("Failed to create guardrail");
    let mut fields = validated(input, String::new())?;
    let id = uuid::Uuid::new_v4().to_string();
    let key = reserve_key(&state.db, &base_key(&fields.name), &id).await.map_err(failed)?;
    fields.key = key.clone();
    let record = StoredRecord::new(id.clone(), &fields.name, &fields);
    if let Err(err) = GUARDRAILS.insert(&state.db.pool, &record).await {
        let _ = release_key(&state.db.pool, &key).await;
        return Err(ApiError::internal("Failed to create guardrail")(err));
    }
    Ok(Json(json!({ "id": id, "key": key, "message": "Guardrail created" })))
}

/// List every guardrail in the workspace, newest first.
#[utoipa::path(get, path = "/v1/ext/guardrail", tag = "guardrails",
    params(PageQuery), responses((status = 200, body = [Guardrail]), (status = 401)))]
async fn list_guardrails(
    State(state): State<AppState>,
    ApiQuery(query): ApiQuery<PageQuery>,
) -> ApiResult<axum::response::Response> {
    let failed = ApiError::internal("Failed to retrieve guardrail details");
    let (records, total) = GUARDRAILS.list(&state.db, None, query.page()?).await.map_err(failed)?;
    let guardrails = records.iter().map(to_guardrail).collect::<Result<Vec<_>, _>>();
    Ok(with_total(guardrails.map_err(ApiError::internal("Failed to retrieve guardrail details"))?, total))
}

#[utoipa::path(get, path = "/v1/ext/guardrail/{id}", tag = "guardrails",
    responses((status = 200, body = Guardrail), (status = 404, description = "`{message: \"Guardrail not found\"}`")))]
async fn get_guardrail(State(state): State<AppState>, Path(id): Path<String>) -> ApiResult<Json<Guardrail>> {
    let id = parse_id(&id, ApiError::NotFoundMessage(NOT_FOUND))?;
    let failed = ApiError::internal("Failed to retrieve guardrail details");
    let record = GUARDRAILS.get(&state.db, &id).await.map_err(failed)?.ok_or(ApiError::NotFoundMessage(NOT_FOUND))?;
    Ok(Json(to_guardrail(&record).map_err(ApiError::internal("Failed to retrieve guardrail details"))?))
}

/// Full replace of every client-settable field; `key` never changes.
#[utoipa::path(put, path = "/v1/ext/guardrail/{id}", tag = "guardrails", request_body = GuardrailInput,
    responses((status = 200, description = "`{id, message: \"Guardrail updated\"}`"), (status = 404, description = "`{message: \"Guardrail not found\"}`")))]
async fn replace_guardrail(
    State(state): State<AppState>,
    Path(id): Path<String>,
    ApiJson(input): ApiJson<GuardrailInput>,
) -> ApiResult<Json<Value>> {
    let id = parse_id(&id, ApiError::NotFoundMessage(NOT_FOUND))?;
    let failed = ApiError::internal("Failed to update guardrail");
    let existing = GUARDRAILS.get(&state.db, &id).await.map_err(failed)?.ok_or(ApiError::NotFoundMessage(NOT_FOUND))?;
    let current: GuardrailFields = existing.fields().map_err(ApiError::internal("Failed to update guardrail"))?;
    let fields = validated(input, current.key)?;
    let replaced = GUARDRAILS
        .replace(&state.db.pool, &existing.with_fields(&fields.name, &fields))
        .await
        .map_err(ApiError::internal("Failed to update guardrail"))?;
    if !replaced {
        return Err(ApiError::NotFoundMessage(NOT_FOUND));
    }
    Ok(Json(json!({ "id": id, "message": "Guardrail updated" })))
}

/// Delete a guardrail. Not cascading: agents keep the reference, which is skipped when read or run.
#[utoipa::path(delete, path = "/v1/ext/guardrail/{id}", tag = "guardrails",
    responses((status = 200, description = "`{id, message: \"Guardrail deleted\"}`"), (status = 404, description = "`{message: \"Guardrail not found\"}`")))]
async fn delete_guardrail(State(state): State<AppState>, Path(id): Path<String>) -> ApiResult<Json<Value>> {
    let id = parse_id(&id, ApiError::NotFoundMessage(NOT_FOUND))?;
    let failed = ApiError::internal("Failed to delete guardrail");
    let mut tx = state.db.begin_write().await.map_err(failed)?;
    let deleted = GUARDRAILS.delete(&mut *tx, &id).await.map_err(ApiError::internal("Failed to delete guardrail"))?;
    if !deleted {
        return Err(ApiError::NotFoundMessage(NOT_FOUND));
    }
    release_keys_of(&mut *tx, &id).await.map_err(ApiError::internal("Failed to delete guardrail"))?;
    tx.commit().await.map_err(ApiError::internal("Failed to delete guardrail"))?;
    Ok(Json(json!({ "id": id, "message": "Guardrail deleted" })))
}

#[cfg(test)]
mod tests {
    use super::base_key;

    #[test]
    fn key_replaces_each_non_alphanumeric_character_without_collapsing() {
        assert_eq!(base_key("No Medical-Advice! x"), "no_medical_advice__x");
        assert_eq!(base_key("ABC123"), "abc123");
        assert_eq!(base_key("café"), "caf_");
        assert_eq!(base_key("  "), "__");
    }
}
