//! The real VAD and turn model on speech the test generates with espeak-ng: event times against the true
//! speech bounds of the generated audio, and the endpointing rule exactly.

mod common;

use common::speak;

use std::path::PathBuf;
use std::time::Duration;

use confab_engine::conversation::ConversationConfig;
use confab_engine::events::{ConversationEvent, EventKind};
use confab_engine::simulate::run_audio;
use confab_engine::time::MediaTime;

/// One Silero window: the tolerance on speech bounds.
const VAD_WINDOW: Duration = Duration::from_millis(32);

/// First and last sample louder than 2% of full scale.
fn speech_bounds(clip: &[f32]) -> (usize, usize) {
    let loud = |s: &f32| s.abs() > 0.02;
    (clip.iter().position(loud).unwrap(), clip.iter().rposition(loud).unwrap() + 1)
}

struct Scene {
    audio: Vec<f32>,
    /// True `[start, end)` of each utterance, in samples.
    bounds: Vec<(usize, usize)>,
}

fn scene(parts: &[(f32, &str)], tail_seconds: f32) -> Scene {
    let mut audio = Vec::new();
    let mut bounds = Vec::new();
    for (silence, text) in parts {
        audio.extend(std::iter::repeat_n(0.0, (silence * 16_000.0) as usize));
        let clip = speak(text);
        let (start, end) = speech_bounds(&clip);
        bounds.push((audio.len() + start, audio.len() + end));
        audio.extend(clip);
    }
    audio.extend(std::iter::repeat_n(0.0, (tail_seconds * 16_000.0) as usize));
    Scene { audio, bounds }
}

fn run(scene: &Scene, config: ConversationConfig) -> Vec<ConversationEvent> {
    let io = confab_engine::simulate::io_runtime().unwrap();
    let models: PathBuf = confab_models::default_models_dir();
    run_audio(&io, &models, &scene.audio, config, None, false, &mut |_| {})
        .expect("models are fetched by scripts/test.sh (confab models fetch)")
        .events
}

fn times(events: &[ConversationEvent], name: &str) -> Vec<Duration> {
    events.iter().filter(|e| e.kind.name() == name).map(|e| e.media_time).collect()
}

fn at(samples: usize) -> Duration {
    MediaTime(samples as u64).as_duration()
}

fn assert_near(actual: Duration, expected: Duration, what: &str) {
    let delta = actual.abs_diff(expected);
    assert!(delta <= VAD_WINDOW, "{what}: {actual:?} vs true {expected:?} (off by {delta:?})");
}

#[test]
fn speech_bounds_are_found_within_one_vad_window() {
    let scene = scene(
        &[(0.7, "Hello I would like to book a table for two people tonight"), (1.6, "What time do you open tomorrow")],
        2.5,
    );
    let events = run(&scene, ConversationConfig::default());
    let started = times(&events, "user.started_speaking");
    let stopped = times(&events, "user.stopped_speaking");
    assert_eq!(started.len(), 2, "{events:?}");
    assert_eq!(stopped.len(), 2, "{events:?}");
    for (i, (start, end)) in scene.bounds.iter().enumerate() {
        eprintln!("DELTA start {:?} true {:?} / stop {:?} true {:?}", started[i], at(*start), stopped[i], at(*end));
        assert_near(started[i], at(*start), "start");
        assert_near(stopped[i], at(*end), "end");
    }
}

#[test]
fn commits_follow_the_endpointing_rule_exactly() {
    let scene =
        scene(&[(0.5, "Please tell me the opening hours of the museum"), (1.8, "And how much is a ticket")], 4.0);
    let config = ConversationConfig::default();
    let events = run(&scene, config);
    let stopped = times(&events, "user.stopped_speaking");
    let committed = times(&events, "utterance_committed");
    assert_eq!(committed.len(), 2, "{events:?}");
    for (stop, commit) in stopped.iter().zip(&committed) {
        let delay = *commit - *stop;
        assert!(
            delay == config.endpoint.min_delay.as_duration() || delay == config.endpoint.max_delay.as_duration(),
            "commit {commit:?} after stop {stop:?}: {delay:?} is neither delay"
        );
    }
    // Speech resumed within the max delay would have cancelled the commit; here each turn is one commit.
    let order: Vec<&str> = events.iter().map(|e| e.kind.name()).collect();
    assert_eq!(
        order,
        [
            "user.started_speaking",
            "user.stopped_speaking",
            "utterance_committed",
            "user.started_speaking",
            "user.stopped_speaking",
            "utterance_committed",
            "call_ended"
        ]
    );
    assert!(matches!(events.last().map(|e| &e.kind), Some(EventKind::CallEnded)));
}

#[test]
fn a_pause_shorter_than_the_min_delay_keeps_one_turn() {
    // A comma makes espeak-ng pause briefly inside the sentence: still one committed turn.
    let scene = scene(&[(0.5, "I need a taxi, to the airport, please")], 3.0);
    let events = run(&scene, ConversationConfig::default());
    assert_eq!(times(&events, "utterance_committed").len(), 1, "{events:?}");
}

#[test]
fn silence_produces_no_speech_events() {
    let scene = Scene { audio: vec![0.0; 16_000 * 3], bounds: vec![] };
    let events = run(&scene, ConversationConfig::default());
    let names: Vec<&str> = events.iter().map(|e| e.kind.name()).collect();
    assert_eq!(names, ["call_ended"]);
}
