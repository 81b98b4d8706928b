//! Conversation records and their transcript entries. Status moves STARTED → IN_PROGRESS → ENDED and
//! never backwards; transcript entries are appended as turns are committed.

use serde::Serialize;
use serde_json::Value;
use sqlx::Row;
use sqlx::any::AnyRow;
#[cfg(feature = "openapi")]
use utoipa::ToSchema;

use super::{Db, Page, like_pattern};

pub const STATUS_STARTED: &str = "STARTED";
pub const STATUS_IN_PROGRESS: &str = "IN_PROGRESS";
pub const STATUS_ENDED: &str = "ENDED";
/// `type` of a conversation joined through its `join_link`.
pub const TYPE_CONVERSATION: &str = "conversation";
/// `type` of a conversation held in an external meeting.
pub const TYPE_EXTERNAL_MEETING: &str = "external_meeting";

/// The list form: every field of SPEC.md's Conversation.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct ConversationSummary {
    pub id: String,
    pub agent_id: String,
    pub agent_name: String,
    /// Serialized conversational context.
    pub context: String,
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub meta_data: Value,
    pub join_link: String,
    /// STARTED, IN_PROGRESS or ENDED.
    pub status: String,
    pub is_active: bool,
    pub created_at: String,
    pub updated_at: String,
    pub job_id: Option<String>,
    pub feedback: String,
    pub rating: Option<i64>,
    pub usage_status: String,
    pub usage_json: String,
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub snippets: Value,
    pub user_name: String,
    pub user_id: String,
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub chat_history: Value,
    /// `conversation` (join link) or `external_meeting`.
    #[serde(rename = "type")]
    pub conversation_type: String,
    pub avatar_id: String,
    #[serde(skip)]
    pub is_recorded: bool,
    #[serde(skip)]
    pub recording_url: String,
    /// Why the platform ended the conversation (`worker_lost`, `server_restart`), or why a meeting bot left
    /// or could not join (docs/meetings.md); absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub end_reason: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct TranscriptEntry {
    pub timestamp: String,
    /// `user` or `assistant`.
    pub role: String,
    pub content: String,
    pub conversation_id: String,
    /// Media time of the turn, in seconds since the conversation began.
    pub message_timestamp: f64,
    /// External meetings: who said this user turn, as the meeting showed its active speaker; absent
    /// when unknown (and in 1:1 calls).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub speaker: Option<String>,
}

/// The single-record form returned by get-by-id.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct ConversationDetail {
    pub id: String,
    pub agent_id: String,
    pub agent_name: String,
    pub avatar_id: String,
    pub user_id: String,
    pub user_name: String,
    pub context: String,
    pub status: String,
    pub is_recorded: bool,
    pub recording_url: String,
    /// Why the platform ended the conversation (`worker_lost`, `server_restart`), or why a meeting bot left
    /// or could not join (docs/meetings.md); absent when the call ended by itself (SPEC.md's shape is
    /// unchanged then).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub end_reason: Option<String>,
    pub transcript: Vec<TranscriptEntry>,
    pub created_at: String,
    pub updated_at: String,
}

/// Filters of the list endpoint; dates are `YYYY-MM-DD`, already validated.
#[derive(Debug, Default)]
pub struct ConversationFilter<'a> {
    pub search: Option<&'a str>,
    /// Created on or after this day.
    pub from: Option<&'a str>,
    /// Created before the day after this one (the bound is exclusive and already advanced a day).
    pub before: Option<&'a str>,
    pub conversation_type: Option<&'a str>,
}

const COLUMNS: &str = "id, agent_id, agent_name, avatar_id, user_id, user_name, context, meta_data, join_link, status, \
    is_active, conversation_type, job_id, feedback, rating, usage_status, usage_json, snippets, chat_history, \
    is_recorded, recording_url, end_reason, created_at, updated_at";

fn json_column(row: &AnyRow, column: &str) -> Result<Value, sqlx::Error> {
    let text: String = row.try_get(column)?;
    serde_json::from_str(&text).map_err(|err| sqlx::Error::Decode(Box::new(err)))
}

fn decode(row: &AnyRow) -> Result<ConversationSummary, sqlx::Error> {
    Ok(ConversationSummary {
        id: row.try_get("id")?,
        agent_id: row.try_get("agent_id")?,
        agent_name: row.try_get("agent_name")?,
        context: row.try_get("context")?,
        meta_data: json_column(row, "meta_data")?,
        join_link: row.try_get("join_link")?,
        status: row.try_get("status")?,
        is_active: row.try_get::<i64, _>("is_active")? != 0,
        created_at: row.try_get("created_at")?,
        updated_at: row.try_get("updated_at")?,
        job_id: row.try_get("job_id")?,
        feedback: row.try_get("feedback")?,
        rating: row.try_get("rating")?,
        usage_status: row.try_get("usage_status")?,
        usage_json: row.try_get("usage_json")?,
        snippets: json_column(row, "snippets")?,
        user_name: row.try_get("user_name")?,
        user_id: row.try_get("user_id")?,
        chat_history: json_column(row, "chat_history")?,
        conversation_type: row.try_get("conversation_type")?,
        avatar_id: row.try_get("avatar_id")?,
        is_recorded: row.try_get::<i64, _>("is_recorded")? != 0,
        recording_url: row.try_get("recording_url")?,
        end_reason: Some(row.try_get::<String, _>("end_reason")?).filter(|reason| !reason.is_empty()),
    })
}

pub async fn insert(db: &Db, c: &ConversationSummary) -> Result<(), sqlx::Error> {
    let sql = format!(
        "INSERT INTO conversations ({COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, \
         $16, $17, $18, $19, $20, $21, $22, $23, $24)"
    );
    sqlx::query(&sql)
        .bind(&c.id)
        .bind(&c.agent_id)
        .bind(&c.agent_name)
        .bind(&c.avatar_id)
        .bind(&c.user_id)
        .bind(&c.user_name)
        .bind(&c.context)
        .bind(c.meta_data.to_string())
        .bind(&c.join_link)
        .bind(&c.status)
        .bind(i64::from(c.is_active))
        .bind(&c.conversation_type)
        .bind(&c.job_id)
        .bind(&c.feedback)
        .bind(c.rating)
        .bind(&c.usage_status)
        .bind(&c.usage_json)
        .bind(c.snippets.to_string())
        .bind(c.chat_history.to_string())
        .bind(i64::from(c.is_recorded))
        .bind(&c.recording_url)
        .bind(c.end_reason.clone().unwrap_or_default())
        .bind(&c.created_at)
        .bind(&c.updated_at)
        .execute(&db.pool)
        .await?;
    Ok(())
}

pub async fn get(db: &Db, id: &str) -> Result<Option<ConversationSummary>, sqlx::Error> {
    let sql = format!("SELECT {COLUMNS} FROM conversations WHERE id = $1");
    sqlx::query(&sql).bind(id).fetch_optional(&db.pool).await?.as_ref().map(decode).transpose()
}

pub async fn set_join_link(db: &Db, id: &str, join_link: &str) -> Result<(), sqlx::Error> {
    sqlx::query("UPDATE conversations SET join_link = $1 WHERE id = $2")
        .bind(join_link)
        .bind(id)
        .execute(&db.pool)
        .await?;
    Ok(())
}

/// Newest first, with the total number of matches.
pub async fn list(
    db: &Db,
    filter: &ConversationFilter<'_>,
    page: Page,
) -> Result<(Vec<ConversationSummary>, i64), sqlx::Error> {
    let search = filter.search.unwrap_or("").trim();
    let condition = "($1 = '' OR LOWER(id) LIKE $2 ESCAPE '\\' OR LOWER(user_name) LIKE $2 ESCAPE '\\' \
        OR LOWER(agent_name) LIKE $2 ESCAPE '\\' OR LOWER(status) LIKE $2 ESCAPE '\\') \
        AND ($3 = '' OR created_at >= $3) AND ($4 = '' OR created_at < $4) AND ($5 = '' OR conversation_type = $5)";
    let pattern = like_pattern(search);
    let (from, before, kind) =
        (filter.from.unwrap_or(""), filter.before.unwrap_or(""), filter.conversation_type.unwrap_or(""));
    let count_sql = format!("SELECT COUNT(*) AS n FROM conversations WHERE {condition}");
    let total: i64 = sqlx::query(&count_sql)
        .bind(search)
        .bind(&pattern)
        .bind(from)
        .bind(before)
        .bind(kind)
        .fetch_one(&db.pool)
        .await?
        .try_get("n")?;
    let list_sql = format!(
        "SELECT {COLUMNS} FROM conversations WHERE {condition} ORDER BY created_at DESC, id DESC LIMIT $6 OFFSET $7"
    );
    let rows = sqlx::query(&list_sql)
        .bind(search)
        .bind(&pattern)
        .bind(from)
        .bind(before)
        .bind(kind)
        .bind(page.limit)
        .bind(page.offset)
        .fetch_all(&db.pool)
        .await?;
    Ok((rows.iter().map(decode).collect::<Result<_, _>>()?, total))
}

pub async fn transcript(db: &Db, conversation_id: &str) -> Result<Vec<TranscriptEntry>, sqlx::Error> {
    let rows = sqlx::query(
        "SELECT role, content, message_timestamp, created_at, speaker FROM transcript_entries \
         WHERE conversation_id = $1 ORDER BY seq",
    )
    .bind(conversation_id)
    .fetch_all(&db.pool)
    .await?;
    rows.iter()
        .map(|row| {
            Ok(TranscriptEntry {
                timestamp: row.try_get("created_at")?,
                role: row.try_get("role")?,
                content: row.try_get("content")?,
                conversation_id: conversation_id.to_string(),
                message_timestamp: row.try_get("message_timestamp")?,
                speaker: Some(row.try_get::<String, _>("speaker")?).filter(|s| !s.is_empty()),
            })
        })
        .collect()
}

/// Appends one transcript entry, in the caller's transaction (`conversation_events::apply` stores it with
/// the event's status change and webhook).
pub async fn append_transcript_in(
    tx: &mut sqlx::AnyConnection,
    conversation_id: &str,
    role: &str,
    content: &str,
    message_timestamp: f64,
    speaker: Option<&str>,
) -> Result<(), sqlx::Error> {
    let next: i64 =
        sqlx::query("SELECT COALESCE(MAX(seq), 0) + 1 AS next FROM transcript_entries WHERE conversation_id = $1")
            .bind(conversation_id)
            .fetch_one(&mut *tx)
            .await?
            .try_get("next")?;
    sqlx::query(
        "INSERT INTO transcript_entries (conversation_id, seq, role, content, message_timestamp, created_at, speaker) \
         VALUES ($1, $2, $3, $4, $5, $6, $7)",
    )
    .bind(conversation_id)
    .bind(next)
    .bind(role)
    .bind(content)
    .bind(message_timestamp)
    .bind(crate::wall_clock::now_iso())
    .bind(speaker.unwrap_or_default())
    .execute(&mut *tx)
    .await?;
    Ok(())
}

/// Moves the status forward (never back); returns whether it changed.
pub async fn advance_status(db: &Db, id: &str, status: &str) -> Result<bool, sqlx::Error> {
    let mut conn = db.pool.acquire().await?;
    advance_status_in(&mut conn, id, status).await
}

/// `advance_status` on the caller's connection (inside its transaction when it holds one).
pub async fn advance_status_in(conn: &mut sqlx::AnyConnection, id: &str, status: &str) -> Result<bool, sqlx::Error> {
    let allowed_from: &[&str] = match status {
        STATUS_IN_PROGRESS => &[STATUS_STARTED],
        STATUS_ENDED => &[STATUS_STARTED, STATUS_IN_PROGRESS],
        _ => &[],
    };
    let mut changed = false;
    for from in allowed_from {
        let result = sqlx::query(
            "UPDATE conversations SET status = $1, is_active = $2, updated_at = $3 WHERE id = $4 AND status = $5",
        )
        .bind(status)
        .bind(i64::from(status != STATUS_ENDED))
        .bind(crate::wall_clock::now_iso())
        .bind(id)
        .bind(*from)
        .execute(&mut *conn)
        .await?;
        changed |= result.rows_affected() > 0;
    }
    Ok(changed)
}

/// Marks the call recorded, with the URL its recording is served at.
/// Adds one turn's retrieved knowledge to the conversation's `snippets`: `{"turns": [{turn, query,
/// snippets: [{knowledge_base_id, document_id, title, text, score}]}]}`.
pub async fn append_snippets(db: &Db, id: &str, used: &Value) -> Result<(), sqlx::Error> {
    let mut tx = db.begin_write().await?;
    let Some(row) =
        sqlx::query("SELECT snippets FROM conversations WHERE id = $1").bind(id).fetch_optional(&mut *tx).await?
    else {
        return Ok(());
    };
    let mut snippets = json_column(&row, "snippets")?;
    if !snippets["turns"].is_array() {
        snippets = serde_json::json!({ "turns": [] });
    }
    snippets["turns"].as_array_mut().expect("an array").push(used.clone());
    sqlx::query("UPDATE conversations SET snippets = $1, updated_at = $2 WHERE id = $3")
        .bind(snippets.to_string())
        .bind(crate::wall_clock::now_iso())
        .bind(id)
        .execute(&mut *tx)
        .await?;
    tx.commit().await
}

pub async fn set_recording(db: &Db, id: &str, recording_url: &str) -> Result<(), sqlx::Error> {
    sqlx::query("UPDATE conversations SET is_recorded = 1, recording_url = $1, updated_at = $2 WHERE id = $3")
        .bind(recording_url)
        .bind(crate::wall_clock::now_iso())
        .bind(id)
        .execute(&db.pool)
        .await?;
    Ok(())
}

impl ConversationSummary {
    pub fn into_detail(self, transcript: Vec<TranscriptEntry>) -> ConversationDetail {
        ConversationDetail {
            id: self.id,
            agent_id: self.agent_id,
            agent_name: self.agent_name,
            avatar_id: self.avatar_id,
            user_id: self.user_id,
            user_name: self.user_name,
            context: self.context,
            status: self.status,
            is_recorded: self.is_recorded,
            recording_url: self.recording_url,
            end_reason: self.end_reason,
            transcript,
            created_at: self.created_at,
            updated_at: self.updated_at,
        }
    }
}
