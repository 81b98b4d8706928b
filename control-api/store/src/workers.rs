//! Who holds each call, and the calls the platform ends: media workers' heartbeats, which worker holds each
//! conversation (claimed by a compare-and-set, so one conversation is admitted by one worker once;
//! `confab serve` alone claims as `LOCAL_WORKER`), and the ending of calls whose holder is gone — a lost
//! fleet worker (`worker_lost`, exactly once however many replicas sweep) or the previous run of a restarted
//! server (`server_restart`): records ENDED with the reason, `participant_left` and `call_ended` (payload
//! `{"reason": …}`) queued in the same transaction.

use confab_engine::{ConversationEvent, EventKind};
use sqlx::Row;

use super::Db;
use super::conversations::{STATUS_ENDED, STATUS_IN_PROGRESS};

/// `end_reason` of a conversation whose media worker stopped heartbeating mid-call.
pub const REASON_WORKER_LOST: &str = "worker_lost";
/// `end_reason` of a call `confab serve` alone held when it stopped without ending it (a crash, kill -9).
pub const REASON_SERVER_RESTART: &str = "server_restart";
pub use confab_calls::{Claim, LOCAL_WORKER, WorkerBeat};

/// Records a heartbeat (the first one registers the worker).
pub async fn heartbeat(db: &Db, beat: &WorkerBeat, now_ms: i64) -> Result<(), sqlx::Error> {
    sqlx::query(
        "INSERT INTO workers (id, max_calls, active_calls, draining, heartbeat_ms, started_at) \
         VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (id) DO UPDATE SET max_calls = $2, active_calls = $3, \
         draining = $4, heartbeat_ms = $5",
    )
    .bind(&beat.id)
    .bind(beat.max_calls)
    .bind(beat.active_calls)
    .bind(i64::from(beat.draining))
    .bind(now_ms)
    .bind(crate::wall_clock::now_iso())
    .execute(&db.pool)
    .await?;
    Ok(())
}

/// A worker leaves the fleet cleanly (after its calls ended).
pub async fn remove(db: &Db, id: &str) -> Result<(), sqlx::Error> {
    sqlx::query("DELETE FROM workers WHERE id = $1").bind(id).execute(&db.pool).await?;
    Ok(())
}

/// Workers with their last heartbeat, oldest first.
pub async fn list(db: &Db) -> Result<Vec<(WorkerBeat, i64)>, sqlx::Error> {
    let rows = sqlx::query(
        "SELECT id, max_calls, active_calls, draining, heartbeat_ms FROM workers ORDER BY heartbeat_ms, id",
    )
    .fetch_all(&db.pool)
    .await?;
    rows.iter()
        .map(|row| {
            Ok((
                WorkerBeat {
                    id: row.try_get("id")?,
                    max_calls: row.try_get("max_calls")?,
                    active_calls: row.try_get("active_calls")?,
                    draining: row.try_get::<i64, _>("draining")? != 0,
                },
                row.try_get("heartbeat_ms")?,
            ))
        })
        .collect()
}

/// The calls held by the workers that are alive (a heartbeat at or after `alive_since_ms`) and not
/// draining, and the calls those workers may hold (their `max_calls`): (held, capacity). A replica refuses a
/// join at once when every slot of the fleet is taken, rather than queueing it for `--dispatch-timeout`.
pub async fn fleet_load(db: &Db, alive_since_ms: i64) -> Result<(i64, i64), sqlx::Error> {
    // `status <> 'ENDED'` written out, as the partial index `conversations_held` says it (a bound
    // parameter would keep PostgreSQL's generic plan from using it).
    const _: () = assert!(matches!(STATUS_ENDED.as_bytes(), b"ENDED"));
    let row = sqlx::query(
        "SELECT \
           (SELECT COUNT(*) FROM conversations c JOIN workers w ON c.worker_id = w.id \
             WHERE w.heartbeat_ms >= $1 AND w.draining = 0 AND c.status <> 'ENDED') AS held, \
           (SELECT CAST(COALESCE(SUM(max_calls), 0) AS BIGINT) FROM workers \
             WHERE heartbeat_ms >= $1 AND draining = 0) AS capacity",
    )
    .bind(alive_since_ms)
    .fetch_one(&db.pool)
    .await?;
    Ok((row.try_get("held")?, row.try_get("capacity")?))
}

/// Claims `conversation_id` for `worker_id` by compare-and-set: only an unheld conversation that has not
/// ended can be claimed, so a job taken twice is admitted once.
pub async fn claim(db: &Db, conversation_id: &str, worker_id: &str) -> Result<Claim, sqlx::Error> {
    let result = sqlx::query(
        "UPDATE conversations SET worker_id = $1, updated_at = $2 WHERE id = $3 AND worker_id = '' AND status <> $4",
    )
    .bind(worker_id)
    .bind(crate::wall_clock::now_iso())
    .bind(conversation_id)
    .bind(STATUS_ENDED)
    .execute(&db.pool)
    .await?;
    if result.rows_affected() == 1 {
        return Ok(Claim::Claimed);
    }
    Ok(match holder(db, conversation_id).await? {
        None => Claim::Missing,
        Some((_, status)) if status == STATUS_ENDED => Claim::Ended,
        Some((worker, _)) => Claim::Held(worker),
    })
}

/// The worker holding `conversation_id` ('' when none) and its status; None when there is no such
/// conversation.
pub async fn holder(db: &Db, conversation_id: &str) -> Result<Option<(String, String)>, sqlx::Error> {
    let row = sqlx::query("SELECT worker_id, status FROM conversations WHERE id = $1")
        .bind(conversation_id)
        .fetch_optional(&db.pool)
        .await?;
    row.map(|row| Ok((row.try_get("worker_id")?, row.try_get("status")?))).transpose()
}

/// Gives up a claim whose call was never admitted (the offer never came, or was refused), so the
/// participant can try again.
pub async fn release(db: &Db, conversation_id: &str, worker_id: &str) -> Result<(), sqlx::Error> {
    sqlx::query("UPDATE conversations SET worker_id = '' WHERE id = $1 AND worker_id = $2 AND status <> $3")
        .bind(conversation_id)
        .bind(worker_id)
        .bind(STATUS_ENDED)
        .execute(&db.pool)
        .await?;
    Ok(())
}

/// A call the platform ended (its worker was lost, or the server restarted).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LostCall {
    pub worker_id: String,
    pub conversation_id: String,
}

/// Ends the calls of every worker whose last heartbeat is older than `cutoff_ms`, and forgets the worker.
/// Per worker, one transaction: the worker row is deleted by whoever gets there first (a concurrent
/// replica then finds nothing to do), each of its conversations not yet ENDED reads ENDED with
/// `end_reason = worker_lost`, and its `participant_left` (when the participant had joined) and
/// `call_ended` webhooks are stored in the outbox.
pub async fn end_calls_of_lost_workers(db: &Db, cutoff_ms: i64) -> Result<Vec<LostCall>, sqlx::Error> {
    let lost: Vec<String> = sqlx::query("SELECT id FROM workers WHERE heartbeat_ms < $1")
        .bind(cutoff_ms)
        .fetch_all(&db.pool)
        .await?
        .iter()
        .map(|row| row.try_get("id"))
        .collect::<Result<_, _>>()?;
    let mut ended = Vec::new();
    for worker_id in lost {
        ended.extend(end_calls_of(db, &worker_id, cutoff_ms).await?);
    }
    Ok(ended)
}

async fn end_calls_of(db: &Db, worker_id: &str, cutoff_ms: i64) -> Result<Vec<LostCall>, sqlx::Error> {
    let rows =
        sqlx::query("SELECT id, status, user_id, worker_id FROM conversations WHERE worker_id = $1 AND status <> $2")
            .bind(worker_id)
            .bind(STATUS_ENDED)
            .fetch_all(&db.pool)
            .await?;
    let endings = endings(db, &rows, REASON_WORKER_LOST).await?;
    let mut tx = db.begin_write().await?;
    let owned = sqlx::query("DELETE FROM workers WHERE id = $1 AND heartbeat_ms < $2")
        .bind(worker_id)
        .bind(cutoff_ms)
        .execute(&mut *tx)
        .await?
        .rows_affected();
    if owned == 0 {
        return Ok(vec![]);
    }
    let ended = end_in(&mut tx, endings, REASON_WORKER_LOST).await?;
    tx.commit().await?;
    Ok(ended)
}

/// At the start of `confab serve` alone: ends the calls the previous run held (claimed by
/// `LOCAL_WORKER`, or IN_PROGRESS from before calls were claimed) and the external meetings its bots were
/// in or on their way to — ENDED with `end_reason = server_restart`, `participant_left` where the
/// participant had joined, `call_ended`. Conversations nobody joined yet stay open (their join links
/// still work).
pub async fn end_calls_after_restart(db: &Db) -> Result<Vec<LostCall>, sqlx::Error> {
    let rows = sqlx::query(
        "SELECT id, status, user_id, worker_id FROM conversations WHERE status <> $1 \
         AND (worker_id = $2 OR (worker_id = '' AND status = $3) OR conversation_type = $4)",
    )
    .bind(STATUS_ENDED)
    .bind(LOCAL_WORKER)
    .bind(STATUS_IN_PROGRESS)
    .bind(super::conversations::TYPE_EXTERNAL_MEETING)
    .fetch_all(&db.pool)
    .await?;
    let endings = endings(db, &rows, REASON_SERVER_RESTART).await?;
    let mut tx = db.begin_write().await?;
    let ended = end_in(&mut tx, endings, REASON_SERVER_RESTART).await?;
    tx.commit().await?;
    Ok(ended)
}

/// A call to end: its conversation, the worker that held it, and the webhooks it gets.
struct Ending {
    conversation_id: String,
    worker_id: String,
    queued: Vec<crate::outbox::Subscribed>,
}

/// The webhooks each call gets, looked up before the transaction (they only read the agent):
/// `participant_left` when the participant had joined, then `call_ended` with `{"reason": …}`.
async fn endings(db: &Db, rows: &[sqlx::any::AnyRow], reason: &str) -> Result<Vec<Ending>, sqlx::Error> {
    let mut endings = Vec::new();
    for row in rows {
        let (id, status, user_id): (String, String, String) =
            (row.try_get("id")?, row.try_get("status")?, row.try_get("user_id")?);
        let mut events = Vec::new();
        if status == STATUS_IN_PROGRESS {
            events.push(EventKind::ParticipantLeft { id: user_id });
        }
        events.push(EventKind::CallEnded);
        let mut queued = Vec::new();
        for kind in events {
            let ends = matches!(kind, EventKind::CallEnded);
            let event = ConversationEvent { media_time: std::time::Duration::ZERO, kind };
            if let Some(subscribed) = crate::outbox::subscribed(db, &id, &event).await? {
                queued.push(if ends { subscribed.with_payload_field("reason", reason) } else { subscribed });
            }
        }
        endings.push(Ending { conversation_id: id, worker_id: row.try_get("worker_id")?, queued });
    }
    Ok(endings)
}

/// Ends each call not ENDED yet and stores its webhooks, in the caller's transaction.
async fn end_in(
    tx: &mut sqlx::AnyConnection,
    endings: Vec<Ending>,
    reason: &str,
) -> Result<Vec<LostCall>, sqlx::Error> {
    let mut ended = Vec::new();
    for ending in endings {
        let changed = sqlx::query(
            "UPDATE conversations SET status = $1, is_active = 0, end_reason = $2, updated_at = $3 \
             WHERE id = $4 AND worker_id = $5 AND status <> $1",
        )
        .bind(STATUS_ENDED)
        .bind(reason)
        .bind(crate::wall_clock::now_iso())
        .bind(&ending.conversation_id)
        .bind(&ending.worker_id)
        .execute(&mut *tx)
        .await?
        .rows_affected();
        if changed == 0 {
            continue;
        }
        for event in ending.queued {
            event.insert(&mut *tx).await?;
        }
        ended.push(LostCall { worker_id: ending.worker_id, conversation_id: ending.conversation_id });
    }
    Ok(ended)
}

/// Ends one conversation that is not ENDED yet, whoever holds it, with `reason`: ENDED, `end_reason`,
/// `participant_left` (when the participant had joined) and `call_ended` with `{"reason": …}` queued.
/// False when it had ended already (nothing is queued then).
pub async fn end_with_reason(db: &Db, conversation_id: &str, reason: &str) -> Result<bool, sqlx::Error> {
    let rows = sqlx::query("SELECT id, status, user_id, worker_id FROM conversations WHERE id = $1 AND status <> $2")
        .bind(conversation_id)
        .bind(STATUS_ENDED)
        .fetch_all(&db.pool)
        .await?;
    let endings = endings(db, &rows, reason).await?;
    let mut tx = db.begin_write().await?;
    let ended = end_in(&mut tx, endings, reason).await?;
    tx.commit().await?;
    Ok(!ended.is_empty())
}

/// Records why a conversation is ending (before the call is hung up, so the record reads it with ENDED).
pub async fn set_end_reason(db: &Db, conversation_id: &str, reason: &str) -> Result<(), sqlx::Error> {
    sqlx::query("UPDATE conversations SET end_reason = $1 WHERE id = $2 AND status <> $3")
        .bind(reason)
        .bind(conversation_id)
        .bind(STATUS_ENDED)
        .execute(&db.pool)
        .await?;
    Ok(())
}
