//! The runtime in real time: several sessions on one media thread, fed spoken audio at the pace a
//! transport would, each gets its own turn-taking events from the shared, batched inference thread.

mod common;

use common::speak;

use std::time::{Duration, Instant};

use confab_engine::conversation::ConversationConfig;
use confab_engine::core::endpoint::EndpointConfig;
use confab_engine::runtime::{Runtime, RuntimeConfig, RuntimeCounters};
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

    let start = Instant::now();
    let longest = audio.iter().map(Vec::len).max().unwrap();
    let mut fed = 0;
    while fed < longest {
        for (session, samples) in sessions.iter_mut().zip(&audio) {
            let end = (fed + 320).min(samples.len());
            for &s in &samples[fed.min(end)..end] {
                let _ = session.input.push(s);
            }
        }
        fed += 320;
        let due = start + Duration::from_millis((fed / 16) as u64);
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
    }
    std::thread::sleep(Duration::from_millis(300));
    for (i, session) in sessions.iter().enumerate() {
        let names: Vec<&str> = session.events.try_iter().map(|e| e.kind.name()).collect();
        assert_eq!(names, ["user.started_speaking", "user.stopped_speaking", "utterance_committed"], "session {i}");
    }
    assert!(RuntimeCounters::get(&runtime.counters.vad_batches) > 0);
    assert_eq!(RuntimeCounters::get(&runtime.counters.vad_queue_full), 0);
}
