//! `confab worker`: a media worker of the fleet.

use anyhow::Context;
use confab_store as store;
use confab_store::call_records::StoreRecords;
use confab_worker::fleet::FleetWorker;

use crate::cli::{WorkerArgs, WorkerFault};
use crate::media::{allow_private_urls, short_id, start_media};
use crate::{open_database, shutdown_signal};

/// `confab worker`: a media worker of the fleet, until SIGTERM (then it drains).
pub(crate) async fn worker(args: WorkerArgs) -> anyhow::Result<()> {
    let db = open_database(&args.database).await?;
    if db.backend != store::Backend::Postgres {
        anyhow::bail!("a media worker needs the fleet's PostgreSQL: give --database-url postgres://…");
    }
    let id = args.worker_id.unwrap_or_else(short_id);
    let client = confab_calls::fleet_protocol::connect(&args.nats, &format!("confab-worker-{id}"))
        .await
        .with_context(|| format!("cannot reach NATS at {}", args.nats))?;
    let waker = FleetWorker::outbox_waker(client.clone());
    let recordings_dir = args.database.data.join("recordings");
    let models_dir = args.media.models_dir.clone().unwrap_or_else(confab_models::default_models_dir);
    crate::media::use_local_llm(&models_dir, args.media.local_llm.as_deref(), &args.media.model_dirs.dirs)?;
    let default_ip = std::net::IpAddr::from([127, 0, 0, 1]);
    let allow_private = allow_private_urls(args.allow_private_urls);
    let records: std::sync::Arc<dyn confab_calls::CallRecords> = StoreRecords::new(db, Some(waker));
    let providers = crate::media::provider_env(&args.media.endpoints, allow_private)?;
    let media = start_media(
        &args.media,
        records.clone(),
        default_ip,
        args.public_url,
        recordings_dir,
        allow_private,
        providers,
    )
    .await
    .context("the media engine cannot start (run `confab models fetch`)")?;
    let worker = FleetWorker::join_fleet(client, records, std::sync::Arc::new(media), id.clone(), &args.queue)
        .await
        .map_err(|err| anyhow::anyhow!("cannot join the fleet at {}: {err}", args.nats))?;
    if let Some(WorkerFault::CrashBeforeJobAck) = args.fault {
        worker.crash_before_job_ack();
    }
    eprintln!("worker {id}");
    let drain_timeout = std::time::Duration::from_secs_f64(args.drain_timeout.max(0.0));
    worker.run(shutdown_signal(), drain_timeout).await?;
    tracing::info!("confab worker stopped");
    Ok(())
}
