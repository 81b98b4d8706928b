//! The process's registry: every series (docs/api.md, "Metrics"), what records into it, and the page
//! rendered from it with the engine's counters and the session gauges read at that moment.

use std::sync::LazyLock;
use std::sync::atomic::Ordering;

use confab_engine::providers::chain::ServedBy;
use confab_engine::providers::local_llm::queue_counters;
use confab_engine::providers::model_queue::QueueCounters;
use confab_engine::runtime::RuntimeCounters;
use confab_engine::turn_metrics::TurnMetrics;
use prometheus::{
    Encoder, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge, Opts, Registry, TextEncoder,
};

use super::mirrors::{ENGINE_COUNTERS, LLM_QUEUE_COUNTERS, Mirrors, mirror, register, register_mirrors};
use super::provider_health::ProviderSeries;
use super::providers::Providers;
use super::turn_wait;
use crate::placer::LocalCalls;

/// Seconds: from a fast local stage (tens of ms) to a slow remote answer.
const STAGE_BUCKETS: &[f64] = &[0.025, 0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0, 10.0];
const HTTP_BUCKETS: &[f64] = &[0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0];

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
    llm_threads: IntGauge,
    faults: FaultSeries,
    providers: ProviderSeries,
}

/// What the operator sees of faults (docs/api.md, "Faults").
struct FaultSeries {
    database_up: IntGauge,
    nats_connected: IntGauge,
    calls_never_connected: IntCounter,
    calls_refused_full: IntCounter,
}

/// What a replica shows of the fleet (zero outside a fleet).
struct FleetGauges {
    workers: IntGauge,
    draining: IntGauge,
    calls_active: IntGauge,
    calls_max: IntGauge,
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
        let llm_threads = register(
            &registry,
            IntGauge::new(
                "confab_llm_threads",
                "Threads the embedded language model computed its last batch on: fewer than the cores while other work holds them (0 before its first).",
            )
            .expect("valid metric"),
        );
        let faults = FaultSeries {
            database_up: register(
                &registry,
                IntGauge::new(
                    "confab_database_up",
                    "1 while the database answers, 0 while it does not (probed every second).",
                )
                .expect("valid metric"),
            ),
            nats_connected: register(
                &registry,
                IntGauge::new(
                    "confab_nats_connected",
                    "1 while this process is connected to the fleet's NATS (0 outside a fleet or while it is gone).",
                )
                .expect("valid metric"),
            ),
            calls_never_connected: register(
                &registry,
                IntCounter::new(
                    "confab_calls_never_connected_total",
                    "Calls whose media connection never came up (ICE found no working pair, or no media arrived).",
                )
                .expect("valid metric"),
            ),
            calls_refused_full: register(
                &registry,
                IntCounter::new(
                    "confab_calls_refused_total",
                    "Joins refused at once because every call slot (--max-calls) was taken: 503 \"No free media session\".",
                )
                .expect("valid metric"),
            ),
        };
        faults.database_up.set(1);
        Metrics {
            faults,
            providers: ProviderSeries::new(&registry),
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
            llm_threads,
        }
    }

    /// The fleet's workers as a replica reads them from the database.
    pub fn fleet(&self, workers: &[crate::records::WorkerBeat]) {
        let sum = |field: fn(&crate::records::WorkerBeat) -> i64| workers.iter().map(field).sum::<i64>();
        self.fleet.workers.set(workers.len() as i64);
        self.fleet.draining.set(workers.iter().filter(|worker| worker.draining).count() as i64);
        self.fleet.calls_active.set(sum(|worker| worker.active_calls));
        self.fleet.calls_max.set(sum(|worker| worker.max_calls));
    }

    /// One HTTP request answered: its route template, method and status, and how long it took.
    pub fn http_request(&self, route: &str, method: &str, status: &str, seconds: f64) {
        self.http_requests.with_label_values(&[route, method, status]).inc();
        self.http_duration.with_label_values(&[route, method]).observe(seconds);
    }

    /// Whether the database answered the last probe (`db_health`).
    pub fn database_up(&self, up: bool) {
        self.faults.database_up.set(i64::from(up));
    }

    /// Whether this process's NATS connection is up.
    pub fn nats_connected(&self, connected: bool) {
        self.faults.nats_connected.set(i64::from(connected));
    }

    /// A call ended whose media connection never came up.
    pub fn call_never_connected(&self) {
        self.faults.calls_never_connected.inc();
    }

    /// A join refused because the worker (or, in a fleet, every worker) held all the calls it may.
    pub fn call_refused_full(&self) {
        self.faults.calls_refused_full.inc();
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
        // Each stage by the provider name of the one that served it (a fallback, when the first failed).
        let served = |served: Option<&ServedBy>, configured: &String| match served {
            Some(served) if !served.provider.is_empty() => {
                served.provider.split([':', '@']).next().unwrap_or_default().to_string()
            }
            _ => configured.clone(),
        };
        let transcript = metrics.transcript.as_ref();
        let stt = served(transcript.and_then(|t| t.served.as_ref()), &providers.stt);
        observe("stt", &stt, transcript.map(|t| t.duration));
        let llm = served(metrics.reply.llm_served.as_ref(), &providers.llm);
        observe("llm_first_token", &llm, metrics.reply.llm_first_token);
        let synthesis = metrics
            .reply
            .tts_first_audio
            .zip(metrics.reply.first_clause)
            .map(|(audio, clause)| audio.saturating_sub(clause));
        observe("tts_first_audio", &served(metrics.reply.tts_served.as_ref(), &providers.tts), synthesis);
        let answered =
            metrics.committed.zip(metrics.first_audio_played).map(|(c, p)| p.saturating_sub(c).as_duration());
        observe("commit_to_first_audio", "pipeline", answered);
    }

    /// The exposition text, with the session gauges and engine counters of this process's calls (`local`:
    /// none when calls run elsewhere or nowhere) read now.
    pub fn render(&self, local: Option<LocalCalls>) -> String {
        let engine_counters = match local {
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
        self.providers.mirror(&confab_engine::providers::health::process_health());
        let queues = queue_counters();
        mirror(&self.llm_queue, queues);
        self.llm_waiting.set(queues.waiting.load(Ordering::Relaxed) as i64);
        self.llm_threads.set(confab_models::chat_lm::threads_in_use() as i64);
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
