//! Prometheus metrics at `GET /metrics` (text exposition format 0.0.4): HTTP requests by route and
//! status, each live turn's stage latencies by provider, live sessions, the engine's media counters and
//! its turn model's waits (`turn_wait`), the embedded language models' queues and webhook deliveries.
//! One registry per process (`metrics()`); the engine's and queues' counters and the session gauges are
//! read when the page is scraped. Every series is listed in docs/api.md ("Metrics").

mod turn_wait;

use std::sync::LazyLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use axum::extract::{MatchedPath, Request, State};
use axum::http::header;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use confab_engine::providers::local_llm::queue_counters;
use confab_engine::providers::model_queue::QueueCounters;
use confab_engine::runtime::RuntimeCounters;
use confab_engine::turn_metrics::TurnMetrics;
use prometheus::{
    Encoder, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge, Opts, Registry, TextEncoder,
};

use crate::AppState;

/// Seconds: from a fast local stage (tens of ms) to a slow remote answer.
const STAGE_BUCKETS: &[f64] = &[0.025, 0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0, 10.0];
const HTTP_BUCKETS: &[f64] = &[0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0];

/// A counter kept by the engine as an atomic, mirrored as a Prometheus counter: (name, help, field of `T`).
type MirroredCounter<T> = (&'static str, &'static str, fn(&T) -> &AtomicU64);
/// The registered Prometheus counters of a table of mirrored ones, each with its field.
type Mirrors<T> = Vec<(IntCounter, fn(&T) -> &AtomicU64)>;

const ENGINE_COUNTERS: &[MirroredCounter<RuntimeCounters>] = &[
    ("confab_media_ticks_total", "Media ticks (20 ms of every call) run by the engine.", |c| &c.ticks),
    ("confab_media_tick_overruns_total", "Media ticks whose work took longer than 20 ms.", |c| &c.missed_deadlines),
    (
        "confab_media_input_underruns_total",
        "Times a call's incoming audio ran short mid-stream (came late); the engine then waits for 60 ms of it.",
        |c| &c.input_underruns,
    ),
    ("confab_vad_windows_refused_total", "VAD windows dropped because the VAD queue was full.", |c| &c.vad_queue_full),
    (
        "confab_turn_requests_dropped_total",
        "End-of-turn questions dropped because the turn-model queue was full.",
        |c| &c.turn_queue_full,
    ),
    (
        "confab_turn_requests_stale_total",
        "End-of-turn questions dropped unanswered because they waited past their turn's max endpointing delay.",
        |c| &c.turn_stale,
    ),
    (
        "confab_turn_requests_superseded_total",
        "End-of-turn questions replaced unanswered by the same call's newer question (the user spoke again).",
        |c| &c.turn_superseded,
    ),
    ("confab_turn_verdicts_total", "End-of-turn verdicts given by the turn model.", |c| &c.turn_verdicts),
    (
        "confab_agent_jobs_dropped_total",
        "Speech-to-text or reply jobs dropped because a call's agent queue was full.",
        |c| &c.agent_jobs_dropped,
    ),
    ("confab_engine_panics_total", "Panics caught in the engine's threads (each ended the calls it touched).", |c| {
        &c.panics
    }),
];

/// The embedded language models' queues (`confab_engine::providers::model_queue`), process-wide.
const LLM_QUEUE_COUNTERS: &[MirroredCounter<QueueCounters>] = &[
    (
        "confab_llm_requests_refused_total",
        "Requests to an embedded language model refused at once because its queue was full.",
        |c| &c.refused,
    ),
    (
        "confab_llm_requests_abandoned_total",
        "Requests to an embedded language model dropped unstarted: their reply was discarded while they waited.",
        |c| &c.abandoned,
    ),
];

pub struct Metrics {
    registry: Registry,
    http_requests: IntCounterVec,
    http_duration: HistogramVec,
    turn_stage: HistogramVec,
    webhook_deliveries: IntCounterVec,
    sessions_active: IntGauge,
    sessions_max: IntGauge,
    fleet: FleetGauges,
    engine: Mirrors<RuntimeCounters>,
    llm_queue: Mirrors<QueueCounters>,
    llm_waiting: IntGauge,
}

/// What a replica shows of the fleet (zero outside a fleet).
struct FleetGauges {
    workers: IntGauge,
    draining: IntGauge,
    calls_active: IntGauge,
    calls_max: IntGauge,
}

/// The providers of a call's agent, as its configuration names them (`avatars[0].config.{stt,llm,tts}.provider`).
#[derive(Debug, Clone, Default)]
pub struct Providers {
    pub stt: String,
    pub llm: String,
    pub tts: String,
}

impl Providers {
    /// From an agent's pipeline configuration (`avatars[0].config`); a provider not set is `local`.
    pub fn of_pipeline(pipeline: &confab_engine::agent_spec::PipelineSpec) -> Providers {
        let name = |provider: &str| match provider.trim() {
            "" => "local".to_string(),
            named => named.to_ascii_lowercase(),
        };
        Providers {
            stt: name(&pipeline.stt.provider),
            llm: name(&pipeline.llm.provider),
            tts: name(&pipeline.tts.provider),
        }
    }
}

fn register<C: prometheus::core::Collector + Clone + 'static>(registry: &Registry, collector: C) -> C {
    registry.register(Box::new(collector.clone())).expect("each metric is registered once");
    collector
}

/// Registers a Prometheus counter for each of `table`'s.
fn register_mirrors<T>(registry: &Registry, table: &[MirroredCounter<T>]) -> Mirrors<T> {
    table
        .iter()
        .map(|(name, help, field)| (register(registry, IntCounter::new(*name, *help).expect("valid metric")), *field))
        .collect()
}

/// Brings each mirror up to its atomic's total in `source` (the atomics only grow).
fn mirror<T>(mirrors: &Mirrors<T>, source: &T) {
    for (counter, field) in mirrors {
        let total = field(source).load(Ordering::Relaxed);
        counter.inc_by(total.saturating_sub(counter.get()));
    }
}

impl Metrics {
    fn new() -> Metrics {
        let registry = Registry::new();
        let http_requests = register(
            &registry,
            IntCounterVec::new(
                Opts::new(
                    "confab_http_requests_total",
                    "HTTP requests answered, by route template, method and status.",
                ),
                &["route", "method", "status"],
            )
            .expect("valid metric"),
        );
        let http_duration = register(
            &registry,
            HistogramVec::new(
                HistogramOpts::new("confab_http_request_duration_seconds", "Time to answer an HTTP request.")
                    .buckets(HTTP_BUCKETS.to_vec()),
                &["route", "method"],
            )
            .expect("valid metric"),
        );
        let turn_stage = register(
            &registry,
            HistogramVec::new(
                HistogramOpts::new(
                    "confab_turn_stage_seconds",
                    "Each live turn's stages by provider: stt, llm_first_token, tts_first_audio, commit_to_first_audio.",
                )
                .buckets(STAGE_BUCKETS.to_vec()),
                &["stage", "provider"],
            )
            .expect("valid metric"),
        );
        let webhook_deliveries = register(
            &registry,
            IntCounterVec::new(
                Opts::new(
                    "confab_webhook_deliveries_total",
                    "Webhook delivery attempts by outcome: delivered, retried (will be tried again), failed (for good).",
                ),
                &["outcome"],
            )
            .expect("valid metric"),
        );
        let sessions_active =
            register(&registry, IntGauge::new("confab_sessions_active", "Live calls held now.").expect("valid metric"));
        let sessions_max = register(
            &registry,
            IntGauge::new("confab_sessions_max", "Live calls this process can hold (--max-calls; 0 without media).")
                .expect("valid metric"),
        );
        let fleet_gauge =
            |name: &str, help: &str| register(&registry, IntGauge::new(name, help).expect("valid metric"));
        let fleet = FleetGauges {
            workers: fleet_gauge("confab_fleet_workers", "Media workers heartbeating in the fleet (a replica's view)."),
            draining: fleet_gauge("confab_fleet_workers_draining", "Of those, workers draining (SIGTERM)."),
            calls_active: fleet_gauge("confab_fleet_calls_active", "Calls the fleet's workers hold, as last reported."),
            calls_max: fleet_gauge(
                "confab_fleet_calls_max",
                "Calls the fleet's workers can hold (sum of --max-calls).",
            ),
        };
        let engine = register_mirrors(&registry, ENGINE_COUNTERS);
        let llm_queue = register_mirrors(&registry, LLM_QUEUE_COUNTERS);
        let llm_waiting = register(
            &registry,
            IntGauge::new("confab_llm_requests_waiting", "Requests waiting now for an embedded language model.")
                .expect("valid metric"),
        );
        Metrics {
            registry,
            http_requests,
            http_duration,
            turn_stage,
            webhook_deliveries,
            sessions_active,
            sessions_max,
            fleet,
            engine,
            llm_queue,
            llm_waiting,
        }
    }

    /// The fleet's workers as a replica reads them from the database.
    pub fn fleet(&self, workers: &[crate::store::workers::WorkerBeat]) {
        let sum = |field: fn(&crate::store::workers::WorkerBeat) -> i64| workers.iter().map(field).sum::<i64>();
        self.fleet.workers.set(workers.len() as i64);
        self.fleet.draining.set(workers.iter().filter(|worker| worker.draining).count() as i64);
        self.fleet.calls_active.set(sum(|worker| worker.active_calls));
        self.fleet.calls_max.set(sum(|worker| worker.max_calls));
    }

    /// One webhook attempt's outcome: `delivered`, `retried` or `failed`.
    pub fn webhook_attempt(&self, outcome: &str) {
        self.webhook_deliveries.with_label_values(&[outcome]).inc();
    }

    /// A live turn is over: its provider stages go into `confab_turn_stage_seconds`.
    pub fn turn(&self, metrics: &TurnMetrics, providers: &Providers) {
        let observe = |stage: &str, provider: &str, duration: Option<std::time::Duration>| {
            if let Some(duration) = duration {
                self.turn_stage.with_label_values(&[stage, provider]).observe(duration.as_secs_f64());
            }
        };
        observe("stt", &providers.stt, metrics.transcript.map(|t| t.duration));
        observe("llm_first_token", &providers.llm, metrics.reply.llm_first_token);
        let synthesis = metrics
            .reply
            .tts_first_audio
            .zip(metrics.reply.first_clause)
            .map(|(audio, clause)| audio.saturating_sub(clause));
        observe("tts_first_audio", &providers.tts, synthesis);
        let answered =
            metrics.committed.zip(metrics.first_audio_played).map(|(c, p)| p.saturating_sub(c).as_duration());
        observe("commit_to_first_audio", "pipeline", answered);
    }

    /// The exposition text, with the session gauges and engine counters read now.
    pub fn render(&self, state: &AppState) -> String {
        let engine_counters = match state.calls.as_ref().and_then(|calls| calls.local_calls()) {
            Some(local) => {
                self.sessions_active.set(local.active as i64);
                self.sessions_max.set(local.max as i64);
                mirror(&self.engine, &local.engine);
                Some(local.engine)
            }
            None => {
                self.sessions_active.set(0);
                self.sessions_max.set(0);
                None
            }
        };
        let queues = queue_counters();
        mirror(&self.llm_queue, queues);
        self.llm_waiting.set(queues.waiting.load(Ordering::Relaxed) as i64);
        let mut families = self.registry.gather();
        families.push(turn_wait::family(engine_counters.as_ref().map(|counters| &counters.turn_wait)));
        let mut text = Vec::new();
        TextEncoder::new().encode(&families, &mut text).expect("text encoding never fails");
        String::from_utf8(text).expect("the text format is UTF-8")
    }
}

/// The process's metrics.
pub fn metrics() -> &'static Metrics {
    static METRICS: LazyLock<Metrics> = LazyLock::new(Metrics::new);
    &METRICS
}

/// `GET /metrics`.
pub async fn serve_metrics(State(state): State<AppState>) -> Response {
    if state.calls.as_ref().is_some_and(|calls| calls.is_fleet()) {
        match crate::store::workers::list(&state.db).await {
            Ok(workers) => metrics().fleet(&workers.into_iter().map(|(beat, _)| beat).collect::<Vec<_>>()),
            Err(err) => tracing::warn!(error = %err, "cannot read the fleet's workers for /metrics"),
        }
    }
    let text = metrics().render(&state);
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")], text).into_response()
}

/// Counts and times every request by its route template (`unmatched` for paths no route knows, so
/// arbitrary paths do not become series).
pub async fn track_http(request: Request, next: Next) -> Response {
    let route = request.extensions().get::<MatchedPath>().map_or("unmatched", |path| path.as_str()).to_string();
    let method = request.method().as_str().to_string();
    let started = Instant::now();
    let response = next.run(request).await;
    let status = response.status();
    let metrics = metrics();
    metrics.http_requests.with_label_values(&[&route, &method, status.as_str()]).inc();
    metrics.http_duration.with_label_values(&[&route, &method]).observe(started.elapsed().as_secs_f64());
    response
}
