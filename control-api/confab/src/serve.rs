//! `confab serve`: the control plane, with the embedded media worker, a fleet replica's dispatcher, or
//! neither; meeting bots when a browser is found; the calls a crashed earlier run held are ended first.

use std::path::PathBuf;

use anyhow::Context;
use confab_calls::CallPlacer;
use confab_http::replica::dispatch::Dispatcher;
use confab_http::replica::liveness;
use confab_http::replica::placer::FleetPlacer;
use confab_http::{AppConfig, AppState};
use confab_store::call_records::StoreRecords;
use confab_store::{self as store, Db};
use confab_worker::fleet::FleetWorker;
use confab_worker::placer::EmbeddedPlacer;

use crate::cli::{MeetingArgs, ServeArgs};
use crate::media::{allow_private_urls, short_id, start_media};
use crate::shutdown_signal;

pub(crate) async fn serve(args: ServeArgs) -> anyhow::Result<()> {
    // The port first: one in use fails at once, not after the database opens and the models load.
    let listener = tokio::net::TcpListener::bind(args.addr).await.with_context(|| {
        format!("cannot listen on {}: is another server using it? Stop it or give another --addr", args.addr)
    })?;
    let listening = listener.local_addr()?;
    let database_url = store::resolve_url(args.database.database_url.as_deref(), &args.database.data)?;
    // One server per SQLite data directory: a second would end the first's calls as "left over" and send
    // its webhooks twice. Held until this process exits.
    let _data_lock = match database_url.starts_with("sqlite:") {
        true => Some(crate::first_start::lock_data_dir(&args.database.data)?),
        false => None,
    };
    tracing::info!(
        "confab {} will serve http://{listening} (the API, and the console for a browser at /)",
        env!("CARGO_PKG_VERSION")
    );
    tracing::info!(
        "data in {} ({}); models in {}",
        crate::first_start::absolute(&args.database.data).display(),
        crate::first_start::describe_database(&database_url),
        crate::first_start::absolute(&args.media.models_dir.clone().unwrap_or_else(confab_models::default_models_dir))
            .display()
    );
    let db = Db::connect(&database_url).await.context("cannot open the database")?;
    let nats = args.fleet.nats.clone();
    if nats.is_some() && db.backend != store::Backend::Postgres {
        anyhow::bail!("a fleet replica (--nats) needs PostgreSQL: give --database-url postgres://…");
    }
    let public_url = args.public_url.unwrap_or_else(|| format!("http://{}", args.addr));
    let recordings_dir = args.database.data.join("recordings");
    let models_dir = args.media.models_dir.clone().unwrap_or_else(confab_models::default_models_dir);
    crate::media::use_local_llm(&models_dir, args.media.local_llm.as_deref(), &args.media.model_dirs.dirs)?;
    let config = AppConfig {
        public_url: public_url.clone(),
        recordings_dir: recordings_dir.clone(),
        models_dir: models_dir.clone(),
    };
    let mut state = AppState::new(db.clone(), config).await.context("cannot initialise the server")?;
    if nats.is_none() {
        // Alone, this process held every call; in a fleet, lost workers' calls are ended by the sweep.
        end_calls_of_the_previous_run(&db, &public_url, &recordings_dir).await?;
    }
    let resumed =
        confab_http::avatars::custom::resume_unfinished(&db, &models_dir).await.context("cannot resume avatar jobs")?;
    if resumed > 0 {
        tracing::info!(resumed, "resumed unfinished custom avatar jobs");
    }
    let webhook_config = confab_http::webhooks::WebhookConfig {
        allow_private: allow_private_urls(args.allow_private_urls),
        ..Default::default()
    };
    let deliverer = confab_http::webhooks::Deliverer::new(db.clone(), webhook_config);
    let waker = deliverer.waker();
    let allow_private = allow_private_urls(args.allow_private_urls);
    let wants_media = !args.fleet.no_media && (nats.is_none() || args.fleet.embedded_worker);
    let records: std::sync::Arc<dyn confab_calls::CallRecords> = StoreRecords::new(db.clone(), Some(waker.clone()));
    let media = if wants_media {
        let providers = crate::media::provider_env(&args.media.endpoints, allow_private)?;
        start_media(&args.media, records.clone(), args.addr.ip(), public_url, recordings_dir, allow_private, providers)
            .await
    } else {
        tracing::info!("no embedded media worker");
        None
    };
    let embedded: Option<std::sync::Arc<dyn CallPlacer>> =
        media.clone().map(|media| std::sync::Arc::new(EmbeddedPlacer(media)) as std::sync::Arc<dyn CallPlacer>);
    let mut fleet_tasks = Vec::new();
    let mut embedded_worker = None;
    if let Some(url) = &nats {
        let ice = confab_calls::IceServers {
            urls: args.media.ice_servers.clone(),
            username: args.media.ice_username.clone(),
            credential: args.media.ice_credential.clone(),
        };
        let timeout = std::time::Duration::from_secs_f64(args.fleet.dispatch_timeout.max(0.1));
        let dispatcher = Dispatcher::connect(url, db.clone(), timeout, ice, &args.fleet.queue)
            .await
            .map_err(|err| anyhow::anyhow!("cannot join the fleet at {url}: {err}"))?;
        fleet_tasks.push(tokio::spawn(liveness::sweep_lost_workers(db.clone(), waker.clone())));
        fleet_tasks.push(tokio::spawn(liveness::relay_outbox_wakeups(dispatcher.client().clone(), waker.clone())));
        if let Some(media) = &media {
            let id = format!("embedded-{}", short_id());
            let host = std::sync::Arc::new(media.clone());
            let worker =
                FleetWorker::join_fleet(dispatcher.client().clone(), records.clone(), host, id, &args.fleet.queue)
                    .await
                    .map_err(|err| anyhow::anyhow!("cannot start the embedded worker: {err}"))?;
            let stop = std::sync::Arc::new(tokio::sync::Notify::new());
            let stopped = stop.clone();
            let run = worker.run(async move { stopped.notified().await }, confab_worker::media_worker::SHUTDOWN_GRACE);
            embedded_worker = Some((stop, tokio::spawn(run)));
        }
        tracing::info!(nats = %url, "fleet replica");
        state = state.with_calls(std::sync::Arc::new(FleetPlacer { dispatcher, embedded }));
    } else if let Some(embedded) = embedded {
        state = state.with_calls(embedded);
    }
    let bots = start_meeting_bots(&args.meetings, args.media.max_calls, &state, &waker);
    if let Some(bots) = &bots {
        state = state.with_meetings(bots.clone());
    }
    let deliverer = tokio::spawn(deliverer.run());
    // Whether the database answers, asked every second: requests fail fast while it does not.
    let db_watch = tokio::spawn(db.clone().watch());
    let metrics_server = match args.metrics_addr {
        Some(addr) => {
            let listener = tokio::net::TcpListener::bind(addr)
                .await
                .with_context(|| format!("cannot listen on {addr} for metrics"))?;
            tracing::info!(addr = %listener.local_addr()?, "metrics serving without the API key");
            let app = confab_http::metrics_app(state.clone());
            Some(tokio::spawn(async move { axum::serve(listener, app).await }))
        }
        None => None,
    };
    tracing::info!(addr = %listening, backend = ?db.backend, live_calls = state.calls.is_some(), "confab serving");
    confab_http::console::print_sign_in_link(&state).await;
    confab_http::server::serve(listener, confab_http::app(state), args.max_connections, shutdown_signal()).await?;
    if let Some(bots) = bots {
        bots.shutdown(confab_worker::media_worker::SHUTDOWN_GRACE * 2).await;
    }
    if let Some((stop, worker)) = embedded_worker {
        stop.notify_one();
        let _ = worker.await;
    } else if let Some(media) = media {
        media.shutdown().await;
    }
    for task in fleet_tasks {
        task.abort();
    }
    deliverer.abort();
    db_watch.abort();
    if let Some(server) = metrics_server {
        server.abort();
    }
    tracing::info!("confab stopped");
    Ok(())
}

/// The meeting bots, when this process has a media path (embedded worker or fleet) and a browser.
fn start_meeting_bots(
    args: &MeetingArgs,
    max_calls: usize,
    state: &AppState,
    waker: &std::sync::Arc<tokio::sync::Notify>,
) -> Option<std::sync::Arc<confab_meetings::MeetingBots>> {
    use confab_meetings::{BrowserConfig, MeetingBots, MeetingSettings};
    state.calls.as_ref()?;
    let found = args
        .meeting_browser
        .clone()
        .or_else(|| ["chromium", "chromium-browser", "google-chrome"].into_iter().find_map(find_on_path));
    let Some(executable) = found else {
        tracing::warn!("external meetings are off: no Chromium found (give --meeting-browser)");
        return None;
    };
    let browser = BrowserConfig { executable, extra_args: args.meeting_browser_args.clone() };
    let mut settings = MeetingSettings::new(browser);
    settings.lobby_timeout = std::time::Duration::from_secs_f64(args.meeting_lobby_timeout.max(1.0));
    settings.alone_timeout = std::time::Duration::from_secs_f64(args.meeting_alone_timeout.max(1.0));
    settings.webhooks = Some(waker.clone());
    let max = args.max_meetings.unwrap_or(max_calls);
    tracing::info!(browser = %settings.browser.executable.display(), max_meetings = max, "meeting bots ready");
    Some(MeetingBots::new(settings, max))
}

fn find_on_path(name: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?).map(|dir| dir.join(name)).find(|path| path.is_file())
}

/// Ends the calls an earlier run of `confab serve` alone held when it stopped without ending them (a crash):
/// ENDED with `end_reason: server_restart`, `participant_left`/`call_ended` queued, and what was recorded
/// kept (`is_recorded`, `recording_url`; a recording cut by a crash has no cues or duration).
async fn end_calls_of_the_previous_run(
    db: &Db,
    public_url: &str,
    recordings_dir: &std::path::Path,
) -> anyhow::Result<()> {
    let ended = store::workers::end_calls_after_restart(db).await.context("cannot end the previous run's calls")?;
    for call in &ended {
        let id = &call.conversation_id;
        tracing::warn!(conversation_id = %id, "a call of the previous run is ended (server_restart)");
        let recorded = confab_calls::recordings::recorded_file(recordings_dir, id)
            .is_some_and(|(path, _)| std::fs::metadata(path).is_ok_and(|meta| meta.len() > 0));
        if recorded {
            let url = format!("{}/v1/ext/conversation/{id}/recording", public_url.trim_end_matches('/'));
            confab_store::conversations::set_recording(db, id, &url).await?;
        }
    }
    Ok(())
}
