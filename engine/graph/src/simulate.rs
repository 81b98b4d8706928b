//! `confab simulate`: one conversation from a WAV file through the real graph (Silero VAD, Smart Turn,
//! the conversation core), offline. As fast as possible on the media clock by default; at real-time pace
//! with `realtime` (then model time is real and shows in the event times).
//!
//! Events go out as JSON lines (SPEC.md's webhook envelope plus `media_time`); the transcript and the
//! agent's audio (on the input's timeline) go to files.

use std::borrow::Cow;
use std::collections::VecDeque;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use confab_models::silero::{self, SileroState, SileroVad};
use confab_models::smart_turn::{DONE_THRESHOLD, SmartTurn};
use serde_json::{Value, json};

use crate::actions::{ActionSettings, Actions};
use crate::agent_spec::{AgentSpec, AgentSpecError, PipelineConfig};
use crate::audio::level::{SilenceGate, VadDecision};
use crate::audio::{AudioError, wav};
use crate::avatar::stock::{STOCK, stock_face};
use crate::avatar::{FaceRig, RgbImage};
use crate::conversation::{Conversation, ConversationConfig, transcription_start, turn_model_end};
use crate::core::{Epoch, TurnId};
use crate::events::ConversationEvent;
use crate::knowledge::Retrieval;
use crate::providers::env::ProviderEnv;
use crate::responder::{ReplyOutput, Responder};
use crate::session_driver::{AgentResult, DrivenSession, SessionHost};
use crate::time::MediaTime;
use crate::turn_metrics::{ReplyTimings, TurnMetrics, TurnMetricsLog};
use crate::video::recording::{DEFAULT_FACE, RecordingError, write_conversation_webm};
use crate::video::vp8::Vp8Config;

/// Samples per 20 ms frame at 16 kHz: the pace of the media loop.
pub const FRAME: usize = 320;
/// After the input ends, the conversation runs at most this long for the agent to finish.
pub const MAX_TAIL: MediaTime = MediaTime::from_millis(60_000);

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

/// The listening models of one session.
pub struct ListeningModels {
    pub vad: SileroVad,
    pub vad_state: SileroState,
    pub silence: SilenceGate,
    pub turn: SmartTurn,
}

impl ListeningModels {
    pub fn load(models_dir: &Path) -> Result<ListeningModels, confab_models::ModelError> {
        Ok(ListeningModels {
            vad: SileroVad::load(models_dir, 1, 1)?,
            vad_state: SileroState::default(),
            silence: SilenceGate::default(),
            turn: SmartTurn::load(models_dir, 1)?,
        })
    }
}

/// What a run produced.
#[derive(Debug, Default)]
pub struct SimulationRecord {
    pub events: Vec<ConversationEvent>,
    /// One per turn, in the order they were written.
    pub turn_metrics: Vec<TurnMetrics>,
    pub agent_audio: Vec<f32>,
}

/// Where time comes from: the media clock alone, or the wall clock as well (`--realtime`).
struct Pace {
    realtime: Option<Instant>,
}

impl Pace {
    /// Waits until `t` in real-time mode.
    fn wait_until(&self, t: MediaTime) {
        if let Some(start) = self.realtime {
            let due = start + t.as_duration();
            let now = Instant::now();
            if due > now {
                std::thread::sleep(due - now);
            }
        }
    }

    /// The media time at which a result computed now is known: `t` offline, the wall clock in real time.
    fn observed(&self, t: MediaTime) -> MediaTime {
        match self.realtime {
            Some(start) => t.max(MediaTime::from_duration(start.elapsed())),
            None => t,
        }
    }
}

/// One offline run: the conversation (driven as every session is: `session_driver`), and the host that
/// answers its requests in line.
struct Simulation<'a> {
    session: DrivenSession,
    host: InlineHost<'a>,
}

/// A simulation as the session's host (`SessionHost`): the turn model, speech-to-text and the agent's
/// replies run in line, on the audio file; each result is known at the media time the pace says.
struct InlineHost<'a> {
    audio: &'a [f32],
    models: &'a mut ListeningModels,
    responder: Option<&'a mut Responder>,
    io: &'a tokio::runtime::Runtime,
    pace: Pace,
    record: SimulationRecord,
    on_event: &'a mut dyn FnMut(&ConversationEvent),
    on_metrics: &'a mut dyn FnMut(&TurnMetrics),
    /// Results of the agent's replies and the media time at which each is ready.
    pending: VecDeque<(MediaTime, AgentResult)>,
    /// The media time the run stands at.
    now: MediaTime,
    /// The first model failure; the run stops with it.
    failed: Option<SimulateError>,
}

impl Simulation<'_> {
    /// Hands the session the reply results that are ready by `now`.
    fn release_reply(&mut self, now: MediaTime) {
        while self.host.pending.front().is_some_and(|(ready, _)| *ready <= now) {
            if let Some((_, result)) = self.host.pending.pop_front() {
                self.session.apply(result, now);
            }
        }
    }

    /// Answers every request the conversation has made, as of media time `now`.
    fn drain(&mut self, now: MediaTime) -> Result<(), SimulateError> {
        self.host.now = now;
        self.session.drive(&mut self.host);
        self.host.failed.take().map_or(Ok(()), Err)
    }
}

impl<'a> InlineHost<'a> {
    /// The input's audio that speech-to-text reads for the turn `[from, to)`: from
    /// `transcription_start(from)`, within the file.
    fn turn_audio(&self, from: MediaTime, to: MediaTime) -> &'a [f32] {
        let end = (to.samples() as usize).min(self.audio.len());
        let start = (transcription_start(from).samples() as usize).min(end);
        &self.audio[start..end]
    }

    /// The VAD's probability for one window, through the energy gate.
    fn vad(&mut self, window: &[f32]) -> Result<f32, SimulateError> {
        let mut probability = [0.0f32];
        let decision = self.models.silence.decide(window);
        if decision != VadDecision::Skip {
            self.models.vad.infer(&[window], &mut [&mut self.models.vad_state], &mut probability)?;
        }
        Ok(if decision == VadDecision::Infer { probability[0] } else { 0.0 })
    }
}

impl SessionHost for InlineHost<'_> {
    fn now(&self) -> MediaTime {
        self.pace.observed(self.now)
    }

    fn event(&mut self, event: ConversationEvent) {
        (self.on_event)(&event);
        self.record.events.push(event);
    }

    fn turns_over(&mut self, turns: Vec<TurnMetrics>) {
        for metrics in turns {
            (self.on_metrics)(&metrics);
            self.record.turn_metrics.push(metrics);
        }
    }

    fn heard(&mut self, text: &str) {
        if let Some(responder) = self.responder.as_deref_mut() {
            responder.heard(text);
        }
    }

    /// Speech-to-text of the turn so far (and, with it, the early reply's request) runs in line; the
    /// early reply goes on beside the run, on its I/O runtime, as in `confab serve`.
    fn prepare_transcript(&mut self, _: &mut DrivenSession, from: MediaTime, to: MediaTime) {
        let audio = self.turn_audio(from, to);
        if let Some(responder) = self.responder.as_deref_mut() {
            self.io.block_on(responder.prepare_transcript(from, to, audio));
        }
    }

    fn predict_turn(&mut self, session: &mut DrivenSession, last_speech: MediaTime) {
        // Past the end of the file the run hears silence, and so does the turn model.
        let end = turn_model_end(last_speech).samples() as usize;
        let heard: Cow<[f32]> = match self.audio.get(..end) {
            Some(audio) => Cow::Borrowed(audio),
            None => Cow::Owned(self.audio.iter().copied().chain(std::iter::repeat(0.0)).take(end).collect()),
        };
        let probability = match self.models.turn.predict(&heard) {
            Ok(probability) => probability,
            Err(err) => {
                self.failed.get_or_insert(err.into());
                return;
            }
        };
        tracing::debug!(probability, "turn model");
        let observed = self.pace.observed(self.now);
        session.conversation.turn_prediction(last_speech, probability > DONE_THRESHOLD, observed);
    }

    fn transcribe(&mut self, session: &mut DrivenSession, turn: TurnId, from: MediaTime, to: MediaTime, at: MediaTime) {
        let audio = self.turn_audio(from, to);
        let text = match self.responder.as_deref_mut() {
            Some(responder) => self.io.block_on(responder.transcript_for(from, to, audio)).unwrap_or_else(|err| {
                tracing::warn!(error = %err, "speech-to-text failed; the turn's text is empty");
                String::new()
            }),
            None => String::new(),
        };
        let timing = self.responder.as_deref().and_then(Responder::last_transcript);
        session.apply(AgentResult::Transcript { turn, text, timing }, self.pace.observed(at));
    }

    fn respond(&mut self, _: &mut DrivenSession, turn: TurnId, epoch: Epoch, user_text: String) {
        // Each sentence reaches playout when it is ready: at once offline, after the real provider time in
        // real time.
        let (pace, pending, now) = (&self.pace, &mut self.pending, self.now);
        let mut timings = ReplyTimings::default();
        if let Some(responder) = self.responder.as_deref_mut() {
            let mut collect = |output| {
                let result = match output {
                    ReplyOutput::Audio(piece) => AgentResult::Segment(piece),
                    ReplyOutput::Event { epoch, kind } => AgentResult::Event { epoch, kind },
                };
                pending.push_back((pace.observed(now), result));
            };
            let reply = responder.respond(turn, epoch, &user_text, &mut collect);
            if let Err(err) = self.io.block_on(reply) {
                tracing::warn!(error = %err, "the agent's reply failed");
            }
            timings = responder.last_reply();
        }
        self.pending.push_back((self.pace.observed(self.now), AgentResult::ReplyEnd { turn, timings }));
    }

    fn cancel_reply(&mut self, _: Epoch) {}
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

/// Runs `audio` (16 kHz mono) through the graph, calling `on_event` for each event as it is emitted.
pub fn run_audio(
    audio: &[f32],
    config: ConversationConfig,
    models: &mut ListeningModels,
    responder: Option<&mut Responder>,
    realtime: bool,
    on_event: &mut dyn FnMut(&ConversationEvent),
    on_metrics: &mut dyn FnMut(&TurnMetrics),
) -> Result<SimulationRecord, SimulateError> {
    run_audio_on(&io_runtime()?, audio, config, models, responder, realtime, on_event, on_metrics)
}

/// `run_audio` with the providers' calls on `io` (where the responder's MCP sessions live).
#[allow(clippy::too_many_arguments)]
pub fn run_audio_on(
    io: &tokio::runtime::Runtime,
    audio: &[f32],
    config: ConversationConfig,
    models: &mut ListeningModels,
    responder: Option<&mut Responder>,
    realtime: bool,
    on_event: &mut dyn FnMut(&ConversationEvent),
    on_metrics: &mut dyn FnMut(&TurnMetrics),
) -> Result<SimulationRecord, SimulateError> {
    let mut sim = Simulation {
        session: DrivenSession::new(Conversation::new(config), TurnMetricsLog::new(realtime)),
        host: InlineHost {
            audio,
            models,
            responder,
            io,
            pace: Pace { realtime: realtime.then(Instant::now) },
            record: SimulationRecord {
                events: Vec::new(),
                turn_metrics: Vec::new(),
                agent_audio: Vec::with_capacity(audio.len() + FRAME),
            },
            on_event,
            on_metrics,
            pending: VecDeque::new(),
            now: MediaTime::ZERO,
            failed: None,
        },
    };
    let mut frame = [0.0f32; FRAME];
    let input_end = MediaTime(audio.len() as u64);
    let mut next_window = 0usize;
    let mut input_finished = false;
    let mut t = MediaTime::ZERO;
    loop {
        sim.host.pace.wait_until(t);
        sim.session.conversation.handle_timeout(t);
        sim.release_reply(t);
        sim.session.conversation.render(t, &mut frame);
        sim.host.record.agent_audio.extend_from_slice(&frame);
        sim.drain(t)?;
        let frame_end = t + MediaTime(FRAME as u64);
        // Every VAD window whose audio has fully arrived by the end of this frame.
        while next_window + silero::WINDOW <= audio.len() && (next_window + silero::WINDOW) as u64 <= frame_end.0 {
            let probability = sim.host.vad(&audio[next_window..next_window + silero::WINDOW])?;
            let (start, end) = (MediaTime(next_window as u64), MediaTime((next_window + silero::WINDOW) as u64));
            sim.session.conversation.vad_window(start, end, probability);
            sim.drain(end)?;
            next_window += silero::WINDOW;
        }
        if !input_finished && frame_end >= input_end {
            input_finished = true;
            sim.session.conversation.finish_input(input_end.max(MediaTime(next_window as u64)));
            sim.drain(frame_end)?;
        }
        if sim.session.conversation.is_ended() {
            break;
        }
        if input_finished && (!sim.session.conversation.is_busy() || frame_end >= input_end + MAX_TAIL) {
            sim.session.conversation.end_call(frame_end);
            sim.drain(frame_end)?;
            break;
        }
        t = frame_end;
    }
    Ok(sim.host.record)
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

/// One event as a JSON line: the webhook envelope plus `media_time` in seconds.
pub fn event_line(event: &ConversationEvent, conversation_id: &str) -> Value {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_secs_f64();
    let mut line = event.envelope(conversation_id, now);
    line["media_time"] = json!(event.media_time.as_secs_f64());
    line
}

/// One turn's `turn_metrics` line: `TurnMetrics::to_json` plus `conversation_id`.
pub fn metrics_line(metrics: &TurnMetrics, conversation_id: &str) -> Value {
    let mut line = metrics.to_json();
    line["conversation_id"] = json!(conversation_id);
    line
}

/// Transcript entries (SPEC.md's shape) from the events: committed user text and what the user heard.
pub fn transcript(
    events: &[ConversationEvent],
    conversation_id: &str,
    started: chrono::DateTime<chrono::Utc>,
) -> Vec<Value> {
    events
        .iter()
        .filter_map(|event| {
            let (role, content) = event.kind.transcript_entry()?;
            let at = started + chrono::Duration::from_std(event.media_time).unwrap_or_default();
            Some(json!({
                "timestamp": at.format("%Y-%m-%dT%H:%M:%S%.6fZ").to_string(),
                "role": role,
                "content": content,
                "conversation_id": conversation_id,
                "message_timestamp": event.media_time.as_secs_f64(),
            }))
        })
        .collect()
}

/// The whole command: reads the agent and the WAV, streams events to `out`, writes the files.
pub fn run(options: &SimulateOptions, out: &mut dyn Write) -> Result<SimulationRecord, SimulateError> {
    let agent_json = std::fs::read_to_string(&options.agent)
        .map_err(|source| SimulateError::Read { path: options.agent.display().to_string(), source })?;
    let conversation_id = format!("sim-{}", std::process::id());
    run_agent(&agent_json, &conversation_id, options, None, out, &mut |_| {})
}

/// What a run shows as it goes, besides its output lines.
pub enum Observed<'a> {
    Event(&'a ConversationEvent),
    TurnMetrics(&'a TurnMetrics),
}

/// Runs the agent `agent_json` (the Agent resource's shape) as conversation `conversation_id` on
/// `options.input`: event and `turn_metrics` lines to `out` (each also shown to `observe` as it is
/// written), then the files in `options.out_dir`. `retrieval`: the agent's knowledge bases, when the
/// caller has them (a stored agent).
pub fn run_agent(
    agent_json: &str,
    conversation_id: &str,
    options: &SimulateOptions,
    retrieval: Option<Retrieval>,
    out: &mut dyn Write,
    observe: &mut dyn FnMut(Observed<'_>),
) -> Result<SimulationRecord, SimulateError> {
    let spec = AgentSpec::from_json(agent_json)?;
    let config = spec.conversation_config()?;
    // The face is found before anything runs: a face that cannot be drawn fails the run at once.
    let face = options.out_dir.as_ref().map(|_| face_to_draw(&spec, options.custom_face.as_ref())).transpose()?;
    let audio = wav::read_mono_16k(&options.input)?;
    let mut models = ListeningModels::load(&options.models_dir)?;
    let settings = ActionSettings::for_conversation(&spec.actions, conversation_id, options.allow_private_urls);
    let io = io_runtime()?;
    let mut responder = responder_for(&io, &spec, options, settings)?;
    if let Some(retrieval) = retrieval {
        responder = responder.with_retrieval(retrieval);
    }
    let started = chrono::Utc::now();
    let out = std::cell::RefCell::new(out);
    let observe = std::cell::RefCell::new(observe);
    let write_error = std::cell::RefCell::new(None);
    let write_line = |line: Value| {
        let mut out = out.borrow_mut();
        if let Err(err) = writeln!(out, "{line}").and_then(|_| out.flush()) {
            write_error.borrow_mut().get_or_insert(err);
        }
    };
    let record = run_audio_on(
        &io,
        &audio,
        config,
        &mut models,
        Some(&mut responder),
        options.realtime,
        &mut |event| {
            write_line(event_line(event, conversation_id));
            (observe.borrow_mut())(Observed::Event(event));
        },
        &mut |metrics| {
            write_line(metrics_line(metrics, conversation_id));
            (observe.borrow_mut())(Observed::TurnMetrics(metrics));
        },
    )?;
    io.block_on(responder.finish_callbacks());
    let write_error = write_error.into_inner();
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
