//! `confab simulate`: one conversation from a WAV file, offline. The recording is played as a call's user
//! to the runtime live calls run on (`feed`): stepped on the media clock, as fast as the machine goes, by
//! default; the threaded runtime at real-time pace with `realtime` (then model time is real and shows in
//! the event times).
//!
//! Events go out as JSON lines (`lines`: SPEC.md's webhook envelope plus `media_time`); the transcript and
//! the agent's audio (on the input's timeline) go to files.

mod feed;
mod lines;

use std::io::Write;
use std::path::PathBuf;

use serde_json::Value;

use crate::actions::{ActionSettings, Actions};
use crate::agent_spec::{AgentSpec, AgentSpecError, PipelineConfig};
use crate::audio::{AudioError, wav};
use crate::avatar::stock::{STOCK, stock_face};
use crate::avatar::{FaceRig, RgbImage};
use crate::events::ConversationEvent;
use crate::knowledge::Retrieval;
use crate::providers::env::ProviderEnv;
use crate::responder::Responder;
use crate::turn_metrics::TurnMetrics;
use crate::video::recording::{DEFAULT_FACE, RecordingError, write_conversation_webm};
use crate::video::vp8::Vp8Config;

pub use feed::{MAX_TAIL, Observed, run_audio};
pub use lines::{event_line, metrics_line, transcript};

#[derive(Debug, thiserror::Error)]
pub enum SimulateError {
    #[error("cannot read {path}: {source}")]
    Read { path: String, source: std::io::Error },
    #[error("cannot write {path}: {source}")]
    Write { path: String, source: std::io::Error },
    #[error(transparent)]
    Agent(#[from] AgentSpecError),
    #[error(transparent)]
    Audio(#[from] AudioError),
    #[error(transparent)]
    Model(#[from] confab_models::ModelError),
    #[error(transparent)]
    Provider(#[from] crate::providers::ProviderError),
    #[error("cannot write avatar.webm: {0}")]
    Video(#[from] RecordingError),
    #[error(
        "cannot write avatar.webm: avatar \"{0}\" is neither a stock face ({stock}) nor a completed custom avatar in the agent's database (a custom avatar is drawn with --agent-id, from the data directory or database it was made in)",
        stock = STOCK.map(|(id, _)| id).join(", ")
    )]
    UnknownFace(String),
    #[error(transparent)]
    Action(#[from] crate::actions::MalformedAction),
    #[error("the runtime refused the call (an engine thread has died)")]
    Refused,
}

pub struct SimulateOptions {
    pub agent: PathBuf,
    pub input: PathBuf,
    pub out_dir: Option<PathBuf>,
    pub realtime: bool,
    pub models_dir: PathBuf,
    /// Tools and guardrail callbacks may reach loopback and private addresses (`--allow-private-urls`).
    pub allow_private_urls: bool,
    /// The providers' endpoints and keys (the binary reads them from its environment).
    pub providers: ProviderEnv,
    /// The rigged portrait of the agent's custom avatar (`--agent-id` reads it from the database the agent
    /// lives in). Without one the agent's face must be a stock face: an avatar that cannot be drawn is an
    /// error, never a stand-in.
    pub custom_face: Option<(RgbImage, FaceRig)>,
}

/// The face `avatar.webm` shows: the agent's first avatar (`DEFAULT_FACE` for an agent with none), its
/// custom portrait when `custom` is given, else the stock face of that id.
fn face_to_draw(spec: &AgentSpec, custom: Option<&(RgbImage, FaceRig)>) -> Result<(RgbImage, FaceRig), SimulateError> {
    if let Some(face) = custom {
        return Ok(face.clone());
    }
    let id = spec.avatars.first().map_or(DEFAULT_FACE, |avatar| avatar.avatar_key_id.as_str());
    stock_face(id, Vp8Config::default().width).ok_or_else(|| SimulateError::UnknownFace(id.to_string()))
}

/// What a run produced.
#[derive(Debug, Default)]
pub struct SimulationRecord {
    pub events: Vec<ConversationEvent>,
    /// One per turn, in the order they were written.
    pub turn_metrics: Vec<TurnMetrics>,
    pub agent_audio: Vec<f32>,
}

/// The run's I/O runtime: provider calls, tool calls and MCP sessions. One worker thread, so that what
/// runs beside a reply (a guardrail's callback, an MCP session's messages) goes on between replies.
pub fn io_runtime() -> Result<tokio::runtime::Runtime, SimulateError> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("confab-simulate-io")
        .enable_all()
        .build()
        .map_err(|source| SimulateError::Write { path: "the I/O runtime".into(), source })
}

/// The providers of the agent's first avatar, its prompt (`AgentSpec::system_prompt`; a simulation has no
/// conversation context), and its tools, guardrails and MCP servers (connected on `io`).
fn responder_for(
    io: &tokio::runtime::Runtime,
    spec: &AgentSpec,
    options: &SimulateOptions,
    settings: ActionSettings,
) -> Result<Responder, SimulateError> {
    let prompt = spec.system_prompt("");
    let pipeline = PipelineConfig::of_agent(spec);
    let responder = Responder::from_config(&pipeline, prompt, &options.models_dir, &options.providers)?;
    let actions = io.block_on(Actions::connected(&spec.actions, settings))?;
    Ok(responder.with_actions(actions))
}

/// The whole command: reads the agent and the WAV, streams events to `out`, writes the files.
pub fn run(options: &SimulateOptions, out: &mut dyn Write) -> Result<SimulationRecord, SimulateError> {
    let agent_json = std::fs::read_to_string(&options.agent)
        .map_err(|source| SimulateError::Read { path: options.agent.display().to_string(), source })?;
    let spec = AgentSpec::from_json(&agent_json)?;
    let conversation_id = format!("sim-{}", std::process::id());
    run_agent(&spec, &conversation_id, options, None, out, &mut |_| {})
}

/// Runs the agent `spec` as conversation `conversation_id` on
/// `options.input`: event and `turn_metrics` lines to `out` (each also shown to `observe` as it is
/// written), then the files in `options.out_dir`. `retrieval`: the agent's knowledge bases, when the
/// caller has them (a stored agent).
pub fn run_agent(
    spec: &AgentSpec,
    conversation_id: &str,
    options: &SimulateOptions,
    retrieval: Option<Retrieval>,
    out: &mut dyn Write,
    observe: &mut dyn FnMut(Observed<'_>),
) -> Result<SimulationRecord, SimulateError> {
    let config = spec.conversation_config()?;
    // The face is found before anything runs: a face that cannot be drawn fails the run at once.
    let face = options.out_dir.as_ref().map(|_| face_to_draw(spec, options.custom_face.as_ref())).transpose()?;
    let audio = wav::read_mono_16k(&options.input)?;
    let settings = ActionSettings::for_conversation(&spec.actions, conversation_id, options.allow_private_urls);
    let io = io_runtime()?;
    let mut responder = responder_for(&io, spec, options, settings)?;
    if let Some(retrieval) = retrieval {
        responder = responder.with_retrieval(retrieval);
    }
    let started = chrono::Utc::now();
    let mut write_error = None;
    let mut write_line = |line: Value| {
        if let Err(err) = writeln!(out, "{line}").and_then(|_| out.flush()) {
            write_error.get_or_insert(err);
        }
    };
    let record =
        run_audio(&io, &options.models_dir, &audio, config, Some(responder), options.realtime, &mut |observed| {
            match &observed {
                Observed::Event(event) => write_line(event_line(event, conversation_id)),
                Observed::TurnMetrics(metrics) => write_line(metrics_line(metrics, conversation_id)),
            }
            observe(observed);
        })?;
    if let Some(source) = write_error {
        return Err(SimulateError::Write { path: "stdout".into(), source });
    }
    if let Some(dir) = &options.out_dir {
        std::fs::create_dir_all(dir)
            .map_err(|source| SimulateError::Write { path: dir.display().to_string(), source })?;
        let transcript_path = dir.join("transcript.json");
        let entries = transcript(&record.events, conversation_id, started);
        let text = serde_json::to_string_pretty(&entries).expect("JSON values serialize");
        std::fs::write(&transcript_path, text)
            .map_err(|source| SimulateError::Write { path: transcript_path.display().to_string(), source })?;
        wav::write_mono_16k(&dir.join("agent.wav"), &record.agent_audio)?;
        let face = face.expect("found above whenever there is an output directory");
        write_conversation_webm(&dir.join("avatar.webm"), face, &record.agent_audio, &audio)?;
    }
    Ok(record)
}
