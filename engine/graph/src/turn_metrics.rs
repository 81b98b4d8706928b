//! Where a turn's time goes: the stages of one user turn and the agent's answer, on the media clock,
//! plus the wall-clock time each provider stage took. A driver (`confab simulate`) records the stages
//! as it sees them (`TurnMetricsLog`) and writes one `turn_metrics` line per turn when the turn is over
//! (the agent stopped speaking, or the turn was superseded, or the call ended). Shape: `docs/engine.md`.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{Value, json};

use crate::conversation::OverlapDecision;
use crate::core::TurnId;
use crate::providers::chain::ServedBy;
use crate::time::MediaTime;

/// Wall-clock durations of one reply's provider stages, from the language-model request.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ReplyTimings {
    /// The first text from the language model.
    pub llm_first_token: Option<Duration>,
    /// The first piece of the reply (its first clause or sentence) ready for speech synthesis.
    pub first_clause: Option<Duration>,
    /// The first audio from speech synthesis.
    pub tts_first_audio: Option<Duration>,
    /// The first piece's audio complete and handed to playout.
    pub first_segment: Option<Duration>,
    /// The reply was asked for before the commit (preemptive generation); its stages count from the
    /// commit's request all the same.
    pub llm_started_early: bool,
    /// Its first sentence went to the voice before the commit (`speak_ahead`).
    pub speech_started_early: bool,
    /// Early replies asked for during this turn and dropped because the user went on speaking.
    pub early_dropped: u32,
    /// The language model that served the reply, and those that failed it before (`llm_chain`).
    pub llm_served: Option<ServedBy>,
    /// The voice that said the reply's sentences, and those that failed them (`tts_chain`).
    pub tts_served: Option<ServedBy>,
}

/// Wall-clock duration of a turn's speech-to-text, and whether it ran ahead of the commit.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TranscriptTiming {
    pub duration: Duration,
    /// Transcribed during the endpointing delay (the commit found it ready).
    pub prepared_ahead: bool,
    /// The recognizer that gave the transcript, and those that failed it before (`stt_chain`).
    pub served: Option<ServedBy>,
}

/// The stages' names in `media_time`, in the order a turn that is answered goes through them
/// (`interrupted`, when it happens, comes after `first_audio_played`).
pub const STAGES: [&str; 9] = [
    "speech_ended",
    "committed",
    "transcript_final",
    "llm_request",
    "llm_first_token",
    "first_clause",
    "tts_first_audio",
    "first_audio_played",
    "interrupted",
];

/// One turn's stages. Media times are seconds since the start of the conversation; a stage that did
/// not happen (no reply, no interruption) is absent.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TurnMetrics {
    pub turn: TurnId,
    /// The user's last speech before the commit.
    pub speech_ended: Option<MediaTime>,
    pub committed: Option<MediaTime>,
    pub transcript_final: Option<MediaTime>,
    pub llm_request: Option<MediaTime>,
    pub llm_first_token: Option<MediaTime>,
    pub first_clause: Option<MediaTime>,
    pub tts_first_audio: Option<MediaTime>,
    /// The first sample of the answer played to the user (`agent.started_speaking`).
    pub first_audio_played: Option<MediaTime>,
    pub interrupted: Option<MediaTime>,
    pub transcript: Option<TranscriptTiming>,
    pub reply: ReplyTimings,
    /// Speech over the agent's answer and what it came to (a backchannel, or the interruption).
    pub overlaps: Vec<OverlapDecision>,
}

fn millis(duration: Duration) -> f64 {
    (duration.as_secs_f64() * 1e6).round() / 1e3
}

impl TurnMetrics {
    /// Places the reply's provider stages on the media clock, counting from `llm_request`: in real time
    /// the media clock runs with the wall clock; offline it stands still while providers work, and then
    /// only `latency_ms` shows their time.
    fn place_reply(&mut self, realtime: bool) {
        let Some(request) = self.llm_request else { return };
        let at = |stage: Option<Duration>| {
            stage.map(|d| if realtime { request + MediaTime::from_duration(d) } else { request })
        };
        self.llm_first_token = at(self.reply.llm_first_token);
        self.first_clause = at(self.reply.first_clause);
        self.tts_first_audio = at(self.reply.tts_first_audio);
    }

    /// Each stage's media time, named as in `STAGES` and in that order.
    pub fn stages(&self) -> [(&'static str, Option<MediaTime>); 9] {
        let times = [
            self.speech_ended,
            self.committed,
            self.transcript_final,
            self.llm_request,
            self.llm_first_token,
            self.first_clause,
            self.tts_first_audio,
            self.first_audio_played,
            self.interrupted,
        ];
        let mut named = [("", None); 9];
        for (slot, (name, time)) in named.iter_mut().zip(STAGES.into_iter().zip(times)) {
            *slot = (name, time);
        }
        named
    }

    /// The `turn_metrics` line (without `conversation_id`).
    /// Each stage's record of who served it.
    fn served(&self) -> [(&'static str, Option<&ServedBy>); 3] {
        [
            ("stt", self.transcript.as_ref().and_then(|t| t.served.as_ref())),
            ("llm", self.reply.llm_served.as_ref()),
            ("tts", self.reply.tts_served.as_ref()),
        ]
    }

    /// The provider that served each stage (`null` when no chain reported one).
    fn providers(&self) -> Value {
        let providers: serde_json::Map<String, Value> = self
            .served()
            .into_iter()
            .filter_map(|(stage, served)| served.filter(|s| !s.provider.is_empty()).map(|s| (stage, s)))
            .map(|(stage, served)| (stage.to_string(), Value::from(served.provider.clone())))
            .collect();
        if providers.is_empty() { Value::Null } else { Value::Object(providers) }
    }

    /// Every provider that failed a stage of the turn before another served it, in stage order.
    fn fallbacks(&self) -> Vec<Value> {
        self.served()
            .into_iter()
            .flat_map(|(stage, served)| {
                served.into_iter().flat_map(move |s| s.fell_back.iter().map(move |f| (stage, f)))
            })
            .map(|(stage, (provider, reason))| json!({ "stage": stage, "provider": provider, "reason": reason }))
            .collect()
    }

    pub fn to_json(&self) -> Value {
        let stages: BTreeMap<&str, f64> =
            self.stages().into_iter().filter_map(|(name, time)| time.map(|t| (name, t.as_secs_f64()))).collect();
        let mut latency: BTreeMap<&str, f64> = [
            ("stt", self.transcript.as_ref().map(|t| t.duration)),
            ("llm_first_token", self.reply.llm_first_token),
            ("first_clause", self.reply.first_clause),
            ("tts_first_audio", self.reply.tts_first_audio),
            ("first_segment", self.reply.first_segment),
        ]
        .into_iter()
        .filter_map(|(name, value)| value.map(|v| (name, millis(v))))
        .collect();
        if let (Some(committed), Some(played)) = (self.committed, self.first_audio_played) {
            latency.insert("commit_to_first_audio", millis(played.saturating_sub(committed).as_duration()));
        }
        json!({
            "type": "turn_metrics",
            "turn": self.turn.0,
            "media_time": stages,
            "latency_ms": latency,
            "stt_prepared_ahead": self.transcript.as_ref().map(|t| t.prepared_ahead),
            "llm_started_early": self.reply.llm_started_early,
            "speech_started_early": self.reply.speech_started_early,
            "early_replies_dropped": self.reply.early_dropped,
            "providers": self.providers(),
            "fallbacks": self.fallbacks(),
            "overlaps": self.overlaps.iter().map(|o| json!({
                "started": o.since.as_secs_f64(),
                "decided": o.at.as_secs_f64(),
                "interrupted": o.interrupted,
                "reason": o.reason,
                "words": o.words,
            })).collect::<Vec<_>>(),
        })
    }
}

/// The turns in progress, filled in as a driver sees each stage; `finish` hands a turn back once.
#[derive(Debug, Default)]
pub struct TurnMetricsLog {
    open: BTreeMap<u64, TurnMetrics>,
    /// The turn whose answer is playing (or was last asked for).
    speaking: Option<TurnId>,
    realtime: bool,
}

impl TurnMetricsLog {
    /// `realtime`: the media clock runs with the wall clock (provider stages are placed on it).
    pub fn new(realtime: bool) -> TurnMetricsLog {
        TurnMetricsLog { realtime, ..TurnMetricsLog::default() }
    }

    fn entry(&mut self, turn: TurnId) -> &mut TurnMetrics {
        self.open.entry(turn.0).or_insert_with(|| TurnMetrics { turn, ..TurnMetrics::default() })
    }

    pub fn speech_ended(&mut self, turn: TurnId, at: MediaTime) {
        self.entry(turn).speech_ended = Some(at);
    }

    /// The turn was committed at `at`. Earlier turns whose answer never played are over (superseded):
    /// they are returned.
    pub fn committed(&mut self, turn: TurnId, at: MediaTime) -> Vec<TurnMetrics> {
        self.entry(turn).committed = Some(at);
        let superseded: Vec<u64> = self
            .open
            .iter()
            .filter(|(id, m)| **id < turn.0 && m.first_audio_played.is_none())
            .map(|(&id, _)| id)
            .collect();
        if self.speaking.is_some_and(|speaking| superseded.contains(&speaking.0)) {
            self.speaking = None;
        }
        superseded.into_iter().filter_map(|id| self.open.remove(&id)).collect()
    }

    pub fn transcript(&mut self, turn: TurnId, at: MediaTime, timing: Option<TranscriptTiming>) {
        let entry = self.entry(turn);
        entry.transcript_final = Some(at);
        entry.transcript = timing;
    }

    pub fn llm_request(&mut self, turn: TurnId, at: MediaTime) {
        self.entry(turn).llm_request = Some(at);
        self.speaking = Some(turn);
    }

    pub fn reply(&mut self, turn: TurnId, timings: ReplyTimings) {
        let realtime = self.realtime;
        let entry = self.entry(turn);
        entry.reply = timings;
        entry.place_reply(realtime);
    }

    /// `agent.started_speaking` at `at`.
    pub fn started_speaking(&mut self, at: MediaTime) {
        if let Some(turn) = self.speaking {
            let entry = self.entry(turn);
            entry.first_audio_played.get_or_insert(at);
        }
    }

    /// `agent.interrupted` at `at`.
    pub fn interrupted(&mut self, at: MediaTime) {
        if let Some(turn) = self.speaking {
            self.entry(turn).interrupted.get_or_insert(at);
        }
    }

    /// Speech over the agent's answer was decided (`OverlapDecision`).
    pub fn overlap(&mut self, decision: OverlapDecision) {
        if let Some(turn) = self.speaking {
            self.entry(turn).overlaps.push(decision);
        }
    }

    /// `agent.stopped_speaking`: the speaking turn is over.
    pub fn stopped_speaking(&mut self) -> Option<TurnMetrics> {
        let turn = self.speaking.take()?;
        self.open.remove(&turn.0)
    }

    /// Every turn still open (the call ended), in order.
    pub fn finish_all(&mut self) -> Vec<TurnMetrics> {
        self.speaking = None;
        std::mem::take(&mut self.open).into_values().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(value: u64) -> MediaTime {
        MediaTime::from_millis(value)
    }

    #[test]
    fn a_turn_is_reported_once_when_the_agent_stops_speaking_with_its_stages_in_order() {
        let mut log = TurnMetricsLog::new(true);
        let turn = TurnId(1);
        log.speech_ended(turn, ms(1_700));
        assert!(log.committed(turn, ms(2_200)).is_empty());
        let stt = TranscriptTiming {
            duration: Duration::from_millis(150),
            prepared_ahead: true,
            served: Some(ServedBy {
                provider: "local:default".into(),
                fell_back: vec![("deepgram:nova-3".into(), "server_error")],
            }),
        };
        log.transcript(turn, ms(2_220), Some(stt));
        log.llm_request(turn, ms(2_220));
        let reply = ReplyTimings {
            llm_first_token: Some(Duration::from_millis(120)),
            first_clause: Some(Duration::from_millis(200)),
            tts_first_audio: Some(Duration::from_millis(260)),
            first_segment: Some(Duration::from_millis(300)),
            llm_started_early: true,
            speech_started_early: true,
            early_dropped: 1,
            llm_served: Some(ServedBy {
                provider: "local:qwen2.5-coder-0.5b-instruct".into(),
                fell_back: vec![("openai:gpt-4o-mini".into(), "deadline")],
            }),
            tts_served: Some(ServedBy { provider: "openai:tts-1/alloy".into(), fell_back: vec![] }),
        };
        log.reply(turn, reply);
        log.started_speaking(ms(2_540));
        let metrics = log.stopped_speaking().expect("the speaking turn");
        assert!(log.stopped_speaking().is_none() && log.finish_all().is_empty(), "reported once");
        let line = metrics.to_json();
        assert_eq!(line["type"], "turn_metrics");
        assert_eq!(
            line["providers"],
            json!({ "stt": "local:default", "llm": "local:qwen2.5-coder-0.5b-instruct", "tts": "openai:tts-1/alloy" })
        );
        assert_eq!(
            line["fallbacks"],
            json!([
                { "stage": "stt", "provider": "deepgram:nova-3", "reason": "server_error" },
                { "stage": "llm", "provider": "openai:gpt-4o-mini", "reason": "deadline" },
            ])
        );
        assert_eq!(line["turn"], 1);
        let stages = &line["media_time"];
        let times: Vec<f64> = STAGES[..8].iter().map(|name| stages[name].as_f64().unwrap()).collect();
        assert_eq!(times, [1.7, 2.2, 2.22, 2.22, 2.34, 2.42, 2.48, 2.54]);
        assert!(stages.get("interrupted").is_none());
        assert_eq!(line["latency_ms"]["commit_to_first_audio"], 340.0);
        assert_eq!(line["latency_ms"]["stt"], 150.0);
        assert_eq!(line["stt_prepared_ahead"], true);
        assert_eq!(line["llm_started_early"], true);
        assert_eq!(line["speech_started_early"], true);
        assert_eq!(line["early_replies_dropped"], 1);
    }

    #[test]
    fn offline_the_provider_stages_sit_at_the_request_and_their_time_shows_in_latency() {
        let mut log = TurnMetricsLog::new(false);
        let turn = TurnId(3);
        log.committed(turn, ms(1_000));
        log.llm_request(turn, ms(1_000));
        log.reply(turn, ReplyTimings { llm_first_token: Some(Duration::from_millis(850)), ..ReplyTimings::default() });
        log.interrupted(ms(1_500));
        let line = log.finish_all().remove(0).to_json();
        assert_eq!(line["media_time"]["llm_first_token"], 1.0);
        assert_eq!(line["latency_ms"]["llm_first_token"], 850.0);
        assert_eq!(line["media_time"]["interrupted"], 1.5);
    }

    #[test]
    fn a_turn_that_never_spoke_is_reported_when_a_later_one_is_committed() {
        let mut log = TurnMetricsLog::new(false);
        log.committed(TurnId(1), ms(1_000));
        let done = log.committed(TurnId(2), ms(3_000));
        assert_eq!(done.iter().map(|m| m.turn).collect::<Vec<_>>(), [TurnId(1)]);
        assert_eq!(log.finish_all().iter().map(|m| m.turn).collect::<Vec<_>>(), [TurnId(2)]);
    }
}
