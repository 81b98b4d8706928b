//! The runtime: in real time, several sessions on one media thread, fed spoken audio at the pace a
//! transport would, each get their own turn-taking events from the shared, batched inference thread; stepped
//! on media time (`SteppedRuntime`), slots are reused without a trace and a stalled event consumer holds up
//! no other session.

mod common;

use common::speak;

use std::time::Duration;

use confab_engine::conversation::ConversationConfig;
use confab_engine::core::endpoint::EndpointConfig;
use confab_engine::runtime::{CallRuntime, Runtime, RuntimeConfig, RuntimeCounters, SteppedRuntime};
use confab_engine::time::MediaTime;

#[test]
fn sessions_get_their_own_events_in_real_time() {
    let mut config = RuntimeConfig::new(confab_models::default_models_dir(), 8);
    config.media_threads = 1;
    let mut runtime = Runtime::start(config).expect("models are fetched");
    let texts = ["Where is the nearest station", "Book me a table for two", "Is it going to rain today"];
    // Whatever the turn model says, each turn commits within 1 s of its end, well inside the 2 s tail.
    let turn_taking = ConversationConfig {
        endpoint: EndpointConfig { min_delay: MediaTime::from_millis(500), max_delay: MediaTime::from_millis(1000) },
        ..ConversationConfig::default()
    };
    let mut sessions: Vec<_> = texts.iter().map(|_| runtime.open_session(turn_taking, None).unwrap()).collect();
    let mut audio: Vec<Vec<f32>> = texts
        .iter()
        .map(|t| {
            let mut a = vec![0.0; 8_000];
            a.extend(speak(t));
            a.extend(vec![0.0; 16_000 * 2]);
            a
        })
        .collect();
    // Stagger the sessions so their events differ in time.
    audio[1].splice(0..0, vec![0.0; 4_800]);

    let longest = audio.iter().map(Vec::len).max().unwrap();
    common::in_real_time(longest, |frame| {
        for (session, samples) in sessions.iter_mut().zip(&audio) {
            let end = frame.end.min(samples.len());
            for &s in &samples[frame.start.min(end)..end] {
                let _ = session.input.push(s);
            }
        }
        true
    });
    // Each session's three events, waited for (each turn committed within its 2 s tail of silence).
    let expected = ["user.started_speaking", "user.stopped_speaking", "utterance_committed"];
    for (i, session) in sessions.iter().enumerate() {
        let names: Vec<&str> = (0..expected.len())
            .map_while(|_| session.events.recv_timeout(Duration::from_secs(10)).ok())
            .map(|e| e.kind.name())
            .collect();
        assert_eq!(names, expected, "session {i}");
        assert!(session.events.try_recv().is_err(), "session {i}: nothing more");
    }
    assert!(RuntimeCounters::get(&runtime.counters.vad_batches) > 0);
    assert_eq!(RuntimeCounters::get(&runtime.counters.vad_queue_full), 0);
}

/// Slots are reused: three times as many sessions as the runtime holds, opened and closed one after the
/// other on the runtime stepped on media time, each hears its user at the same point of its audio (a reused
/// slot starts from a fresh VAD state) and ends with `call_ended` (the ninth call once deafened every call).
#[test]
fn every_session_hears_its_user_after_the_slots_have_been_reused() {
    const MAX_SESSIONS: usize = 3;
    let config = RuntimeConfig::new(confab_models::default_models_dir(), MAX_SESSIONS);
    let mut runtime = SteppedRuntime::new(&config).expect("models are fetched");
    let mut audio = vec![0.0; 4_800];
    audio.extend(speak("Hello there"));
    audio.extend(vec![0.0; 16_000]);
    let mut seen = Vec::new();
    let mut heard_at = Vec::new();
    for call in 0..3 * MAX_SESSIONS {
        let mut session = runtime.open_session(ConversationConfig::default(), None).expect("a free slot");
        assert!(!seen.contains(&session.id), "call {call}: {} was used before", session.id);
        seen.push(session.id);
        let mut heard = None;
        for frame in audio.chunks(320) {
            for &sample in frame {
                session.input.push(sample).unwrap();
            }
            runtime.step();
            heard = session.events.try_iter().find(|e| e.kind.name() == "user.started_speaking");
            if heard.is_some() {
                break;
            }
        }
        let heard = heard.unwrap_or_else(|| panic!("call {call} (session {}) did not hear its user", session.id));
        heard_at.push(heard.media_time);
        runtime.close_session(session.id);
        runtime.step();
        let names: Vec<&str> = session.events.try_iter().map(|e| e.kind.name()).collect();
        assert_eq!(names.last(), Some(&"call_ended"), "call {call}: {names:?}");
        assert_eq!(runtime.active_sessions(), 0, "call {call}: the ended session is dropped with its step");
    }
    assert!(heard_at.windows(2).all(|pair| pair[0] == pair[1]), "every call heard its user at once: {heard_at:?}");
    assert_eq!(seen.iter().map(|id| id.slot).max(), Some(MAX_SESSIONS as u32 - 1), "slots are reused: {seen:?}");
    assert_eq!(RuntimeCounters::get(&runtime.counters.panics), 0);
}

/// One session's event consumer stalls (its queue holds one event and nobody reads it) while its call
/// ends (a 200 ms limit: warning, timeout, `call_ended`). Stepped on media time: another session on the same
/// media thread gets its 20 ms frame at every step (the media thread once waited on the full queue, and
/// every call on it went silent), and the stalled session's events all arrive, in order, once its consumer
/// reads them.
#[test]
fn a_stalled_event_consumer_does_not_hold_up_another_session() {
    let mut config = RuntimeConfig::new(confab_models::default_models_dir(), 4);
    config.event_queue = 1;
    let mut runtime = SteppedRuntime::new(&config).expect("models are fetched");
    let short_call =
        ConversationConfig { max_call_duration: Some(MediaTime::from_millis(200)), ..ConversationConfig::default() };
    let stalled = runtime.open_session(short_call, None).unwrap();
    let mut other = runtime.open_session(ConversationConfig::default(), None).unwrap();
    for step in 1..=100 {
        runtime.step();
        let frame = other.output.read_chunk(other.output.slots()).expect("the other session's frame");
        assert_eq!(frame.len(), 320, "step {step}: the other session's 20 ms frame");
        frame.commit_all();
    }
    assert!(stalled.events.is_full(), "the stalled queue held its one event all along");
    let mut names = Vec::new();
    for _ in 0..10 {
        names.extend(stalled.events.try_iter().map(|e| e.kind.name()));
        runtime.step();
    }
    assert_eq!(names, ["max_call_duration_warning", "max_call_duration_timeout", "call_ended"]);
    assert_eq!(RuntimeCounters::get(&runtime.counters.events_dropped), 0);
    assert!(other.events.try_recv().is_err(), "the other call is still on, silent");
}
