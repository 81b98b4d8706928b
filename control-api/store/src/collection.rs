//! A table of JSON documents: one resource kind per table, with `id`, `name` (for search) and
//! timestamps as columns. Every document resource (agents, templates, guardrails, tools, MCP servers,
//! knowledge bases, custom avatars) is stored and listed through this one type.

use serde_json::Value;
use sqlx::Row;
use sqlx::any::AnyRow;

use super::{Backend, Db, IDS_PER_QUERY, like_pattern, placeholders};

#[derive(Debug, Clone, Copy)]
pub struct Collection {
    table: &'static str,
}

pub const AGENTS: Collection = Collection { table: "agents" };
pub const TEMPLATES: Collection = Collection { table: "templates" };
pub const GUARDRAILS: Collection = Collection { table: "guardrails" };
pub const TOOLS: Collection = Collection { table: "tools" };
pub const MCP_SERVERS: Collection = Collection { table: "mcp_servers" };
pub const KNOWLEDGE_BASES: Collection = Collection { table: "knowledge_bases" };
pub const CUSTOM_AVATARS: Collection = Collection { table: "custom_avatars" };

#[derive(Debug, Clone)]
pub struct StoredRecord {
    pub id: String,
    pub name: String,
    pub body: Value,
    pub created_at: String,
    pub updated_at: String,
}

/// A validated page request.
#[derive(Debug, Clone, Copy)]
pub struct Page {
    pub offset: i64,
    pub limit: i64,
}

impl Page {
    pub const ALL: Page = Page { offset: 0, limit: i64::MAX };
}

/// The columns `decode` reads.
const COLUMNS: &str = "id, name, body, created_at, updated_at";

fn decode(row: &AnyRow) -> Result<StoredRecord, sqlx::Error> {
    let body: String = row.try_get("body")?;
    Ok(StoredRecord {
        id: row.try_get("id")?,
        name: row.try_get("name")?,
        body: serde_json::from_str(&body).map_err(|err| sqlx::Error::Decode(Box::new(err)))?,
        created_at: row.try_get("created_at")?,
        updated_at: row.try_get("updated_at")?,
    })
}

impl Collection {
    pub async fn insert<'c, E>(&self, executor: E, record: &StoredRecord) -> Result<(), sqlx::Error>
    where
        E: sqlx::Executor<'c, Database = sqlx::Any>,
    {
        let sql =
            format!("INSERT INTO {} (id, name, body, created_at, updated_at) VALUES ($1, $2, $3, $4, $5)", self.table);
        sqlx::query(&sql)
            .bind(&record.id)
            .bind(&record.name)
            .bind(record.body.to_string())
            .bind(&record.created_at)
            .bind(&record.updated_at)
            .execute(executor)
            .await?;
        Ok(())
    }

    pub async fn get(&self, db: &Db, id: &str) -> Result<Option<StoredRecord>, sqlx::Error> {
        let sql = format!("SELECT id, name, body, created_at, updated_at FROM {} WHERE id = $1", self.table);
        sqlx::query(&sql).bind(id).fetch_optional(&db.pool).await?.as_ref().map(decode).transpose()
    }

    /// The records with these ids, in the given order; ids with no record are skipped. One query per
    /// `IDS_PER_QUERY` ids, not one per id.
    pub async fn get_many(&self, db: &Db, ids: &[String]) -> Result<Vec<StoredRecord>, sqlx::Error> {
        let mut found = std::collections::HashMap::with_capacity(ids.len());
        for chunk in ids.chunks(IDS_PER_QUERY) {
            let sql = format!(
                "SELECT id, name, body, created_at, updated_at FROM {} WHERE id IN ({})",
                self.table,
                placeholders(chunk.len())
            );
            let rows = chunk.iter().fold(sqlx::query(&sql), |query, id| query.bind(id)).fetch_all(&db.pool).await?;
            for row in &rows {
                let record = decode(row)?;
                found.insert(record.id.clone(), record);
            }
        }
        Ok(ids.iter().filter_map(|id| found.get(id).cloned()).collect())
    }

    /// The ids among `ids` that name no record.
    pub async fn missing(&self, db: &Db, ids: &[String]) -> Result<Vec<String>, sqlx::Error> {
        let mut present = std::collections::HashSet::with_capacity(ids.len());
        for chunk in ids.chunks(IDS_PER_QUERY) {
            let sql = format!("SELECT id FROM {} WHERE id IN ({})", self.table, placeholders(chunk.len()));
            let rows = chunk.iter().fold(sqlx::query(&sql), |query, id| query.bind(id)).fetch_all(&db.pool).await?;
            for row in &rows {
                present.insert(row.try_get::<String, _>("id")?);
            }
        }
        Ok(ids.iter().filter(|id| !present.contains(*id)).cloned().collect())
    }

    /// Newest first. `search` matches the name or the id, case-insensitively, as literal text.
    /// Returns the page and the total number of matches.
    pub async fn list(
        &self,
        db: &Db,
        search: Option<&str>,
        page: Page,
    ) -> Result<(Vec<StoredRecord>, i64), sqlx::Error> {
        let search = search.unwrap_or("").trim();
        let order = "ORDER BY created_at DESC, id DESC";
        let (rows, total) = if search.is_empty() {
            // No filter at all: the count is the one kept by triggers (migration 9), read with the page.
            let count = "SELECT n FROM row_counts WHERE table_name = $1";
            let sql = format!("SELECT {COLUMNS}, ({count}) AS total FROM {} {order} LIMIT $2 OFFSET $3", self.table);
            let rows =
                sqlx::query(&sql).bind(self.table).bind(page.limit).bind(page.offset).fetch_all(&db.pool).await?;
            let total: i64 = match rows.first() {
                Some(row) => row.try_get("total")?,
                // A page past the end has no row to carry the count.
                None => sqlx::query(count).bind(self.table).fetch_one(&db.pool).await?.try_get("n")?,
            };
            (rows, total)
        } else {
            let (filter, value) = self.search_filter(db, search);
            let total: i64 = sqlx::query(&format!("SELECT COUNT(*) AS n FROM {} WHERE {filter}", self.table))
                .bind(&value)
                .fetch_one(&db.pool)
                .await?
                .try_get("n")?;
            let sql = format!("SELECT {COLUMNS} FROM {} WHERE {filter} {order} LIMIT $2 OFFSET $3", self.table);
            let rows = sqlx::query(&sql).bind(&value).bind(page.limit).bind(page.offset).fetch_all(&db.pool).await?;
            (rows, total)
        };
        let records = rows.iter().map(decode).collect::<Result<Vec<_>, _>>()?;
        Ok((records, total))
    }

    /// The `WHERE` clause matching `search` (non-empty) in the name or the id, case-insensitively, and the
    /// value bound to its `$1`. On SQLite, three characters or more are a phrase looked up in the trigram
    /// index (migration 10); otherwise a literal `LIKE` scan.
    fn search_filter(&self, db: &Db, search: &str) -> (String, String) {
        if db.backend == Backend::Sqlite && search.chars().count() >= 3 {
            let phrase = format!("\"{}\"", search.replace('"', "\"\""));
            (format!("id IN (SELECT id FROM {0}_search WHERE {0}_search MATCH $1)", self.table), phrase)
        } else {
            ("LOWER(name) LIKE $1 ESCAPE '\\' OR LOWER(id) LIKE $1 ESCAPE '\\'".to_string(), like_pattern(search))
        }
    }

    /// Replaces name and body; returns false when no record has this id.
    pub async fn replace<'c, E>(&self, executor: E, record: &StoredRecord) -> Result<bool, sqlx::Error>
    where
        E: sqlx::Executor<'c, Database = sqlx::Any>,
    {
        let sql = format!("UPDATE {} SET name = $1, body = $2, updated_at = $3 WHERE id = $4", self.table);
        let result = sqlx::query(&sql)
            .bind(&record.name)
            .bind(record.body.to_string())
            .bind(&record.updated_at)
            .bind(&record.id)
            .execute(executor)
            .await?;
        Ok(result.rows_affected() > 0)
    }

    /// Deletes; returns false when no record has this id.
    pub async fn delete<'c, E>(&self, executor: E, id: &str) -> Result<bool, sqlx::Error>
    where
        E: sqlx::Executor<'c, Database = sqlx::Any>,
    {
        let sql = format!("DELETE FROM {} WHERE id = $1", self.table);
        Ok(sqlx::query(&sql).bind(id).execute(executor).await?.rows_affected() > 0)
    }
}

impl StoredRecord {
    /// A new record with both timestamps set to now.
    pub fn new<T: serde::Serialize>(id: String, name: &str, fields: &T) -> StoredRecord {
        let now = crate::wall_clock::now_iso();
        StoredRecord {
            id,
            name: name.to_string(),
            body: serde_json::to_value(fields).expect("resource fields serialize to JSON"),
            created_at: now.clone(),
            updated_at: now,
        }
    }

    /// This record with new fields and `updated_at` set to now.
    pub fn with_fields<T: serde::Serialize>(&self, name: &str, fields: &T) -> StoredRecord {
        StoredRecord {
            id: self.id.clone(),
            name: name.to_string(),
            body: serde_json::to_value(fields).expect("resource fields serialize to JSON"),
            created_at: self.created_at.clone(),
            updated_at: crate::wall_clock::now_iso(),
        }
    }

    /// The stored fields as their type.
    pub fn fields<T: serde::de::DeserializeOwned>(&self) -> Result<T, sqlx::Error> {
        // From a borrowed `Value`: no copy of the document first.
        T::deserialize(&self.body).map_err(|err| sqlx::Error::Decode(Box::new(err)))
    }
}
