//! Hearing in a noisy room, on the stepped runtime (media time, exact): steady noise (sox's pink + brown
//! noise, a fan and a street) alone opens no user turn once the noise suppressor has started; a question
//! over it is heard as one turn with its words; in quiet the suppressor never starts and the call is heard
//! exactly as without it. Three other voices talking at once 10 dB below the user, once the user has been
//! heard, neither open a turn nor stop the agent, and the user's question over them is one turn with its
//! words; in a quiet room the user's own soft last words, as far below their level as the room, are kept.
//! The user is espeak-ng at −20 dBFS of speech (Piper's joe where the user and the room must be told apart
//! by voice: espeak-ng's voices all sound alike to the voice encoder; one test keeps espeak-ng's for both,
//! told apart by level alone), heard by the local models, in a call of `common::stepped_call`.

mod common;

use std::collections::VecDeque;
use std::sync::atomic::Ordering;

use common::stepped_call::{Call, count, silence};
use common::{speak, speak_as, steady_noise};
use confab_engine::EventKind;
use confab_engine::audio::denoise::NoiseSuppression;
use confab_engine::conversation::ConversationConfig;
use confab_engine::core::endpoint::EndpointConfig;
use confab_engine::core::other_voices::OtherVoices;
use confab_engine::core::vad_gate::VadGateConfig;
use confab_engine::providers::piper_tts::PiperTts;
use confab_engine::time::MediaTime;

/// The speech's level: −20 dBFS RMS over its audible frames.
const SPEECH_RMS: f32 = 0.1;

fn turn_taking(noise_suppression: NoiseSuppression) -> ConversationConfig {
    ConversationConfig {
        endpoint: EndpointConfig { min_delay: MediaTime::from_millis(500), max_delay: MediaTime::from_millis(500) },
        noise_suppression,
        other_voices: OtherVoices::Ignore,
        ..ConversationConfig::default()
    }
}

/// The RMS of `speech`'s audible 20 ms frames.
fn speech_rms(speech: &[f32]) -> f32 {
    let audible: Vec<f32> =
        speech.chunks(320).filter(|f| f.iter().map(|s| s * s).sum::<f32>() / 320.0 > 1e-5).flatten().copied().collect();
    (audible.iter().map(|s| s * s).sum::<f32>() / audible.len() as f32).sqrt()
}

/// `speech` scaled to `rms` of audible speech.
fn at_level(speech: &[f32], rms: f32) -> Vec<f32> {
    let gain = rms / speech_rms(speech);
    speech.iter().map(|s| s * gain).collect()
}

/// `text` spoken at `SPEECH_RMS`.
fn spoken(text: &str) -> Vec<f32> {
    at_level(&speak(text), SPEECH_RMS)
}

/// `text` spoken by Piper's joe at `SPEECH_RMS`.
fn spoken_by_joe(text: &str) -> Vec<f32> {
    let piper = PiperTts::load(&confab_models::default_models_dir()).expect("models are fetched");
    at_level(&piper.render(text).unwrap(), SPEECH_RMS)
}

/// The next tables: three espeak-ng voices talking at once, `seconds` long, at `rms` together.
fn other_tables(seconds: usize, rms: f32) -> Vec<f32> {
    let tables = [
        ("en-gb+m3", "The data can be controlled from the second office, and the meeting on Thursday was moved."),
        (
            "en-us+f2",
            "I told her the flat was too small for the three of them, but she said the garden made up for it.",
        ),
        ("en+m5", "The game went into extra time and nobody could believe the goal in the last minute of it."),
    ];
    let mut room = vec![0.0f32; 16_000 * seconds];
    for (voice, text) in tables {
        let talk = at_level(&speak_as(voice, text), 1.0);
        for (out, s) in room.iter_mut().zip(talk.iter().cycle()) {
            *out += s;
        }
    }
    at_level(&room, rms)
}

/// Words of `other_tables`' talk that are in none of the user's questions.
const THEIR_WORDS: [&str; 9] = ["data", "office", "meeting", "flat", "three", "garden", "game", "goal", "minute"];

/// `speech` from `at` over `noise`.
fn over(noise: &[f32], speech: &[f32], at: usize) -> Vec<f32> {
    let mut mixed = noise.to_vec();
    for (out, s) in mixed[at..].iter_mut().zip(speech) {
        *out += s;
    }
    mixed
}

/// A call where joe asks "What is the capital of France?" in quiet, then, 1 s after its commit (the
/// agent answering), `then`; the call ends at the second commit.
fn joe_asks_twice(then: Vec<f32>) -> (Call, common::stepped_call::Heard) {
    asks_twice(spoken_by_joe("What is the capital of France?"), then)
}

/// A call where the user asks `question` in quiet, then, 1 s after its commit (the agent answering),
/// `then`; the call ends at the second commit.
fn asks_twice(question: Vec<f32>, then: Vec<f32>) -> (Call, common::stepped_call::Heard) {
    let first: VecDeque<f32> = silence(500).into_iter().chain(question).collect();
    let mut call = Call::start(turn_taking(NoiseSuppression::Auto));
    let mut commits = 0;
    let heard = call.run(first, 3_000, |event, script| {
        if event.kind.name() == "utterance_committed" {
            commits += 1;
            if commits > 1 {
                return false;
            }
            *script = silence(1_000).into_iter().chain(then.iter().copied()).collect();
        }
        true
    });
    (call, heard)
}

fn committed(events: &[confab_engine::ConversationEvent]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::UtteranceCommitted { text } => Some(text.to_lowercase()),
            _ => None,
        })
        .collect()
}

/// Ten seconds of steady noise as loud as speech and nothing else: no user turn opens, with the default
/// (`auto`, the suppressor started once the floor is known, 1.5 s in) or without it (`off`: Silero itself
/// does not take this noise for speech).
#[test]
fn steady_noise_alone_opens_no_turn() {
    let noise = steady_noise(16_000 * 10, SPEECH_RMS);
    let mut opened = Vec::new();
    for suppression in [NoiseSuppression::Auto, NoiseSuppression::Off] {
        let mut call = Call::start(turn_taking(suppression));
        let heard = call.run(noise.iter().copied().collect(), 600, |_, _| true);
        let started = call.runtime.counters.noise_suppressed_calls.load(Ordering::Relaxed);
        opened.push((count(&heard.events, "user.started_speaking"), started));
    }
    assert_eq!(opened, [(0, 1), (0, 0)], "(turns opened, suppressor started) with auto, off");
}

/// A question 2 s into steady noise 5 dB below it: one user turn, with the question's words.
#[test]
fn a_question_over_steady_noise_is_heard() {
    let question = spoken("What time does the museum open on Sunday?");
    let noise = steady_noise(16_000 * 2 + question.len() + 16_000 * 2, SPEECH_RMS * 10f32.powf(-5.0 / 20.0));
    let mut call = Call::start(turn_taking(NoiseSuppression::Auto));
    let heard =
        call.run(over(&noise, &question, 32_000).into(), 1_000, |event, _| event.kind.name() != "utterance_committed");
    let turns = committed(&heard.events);
    assert_eq!(turns.len(), 1, "{turns:?}");
    for word in ["time", "museum", "open", "sunday"] {
        assert!(turns[0].contains(word), "{word} in {turns:?}");
    }
}

/// In quiet (digital silence, then a room at −70 dBFS) `auto` never starts the suppressor, and the call is
/// heard exactly as with it `off`: the same events at the same media times. (In Piper's voice: Moonshine's
/// beam reads espeak-ng's "…does a spider have?" here as "…done us either have", and this test is about
/// the suppressor, not the recognizer.)
#[test]
fn quiet_speech_is_heard_as_before() {
    let question: Vec<f32> =
        silence(1_000).into_iter().chain(spoken_by_joe("How many legs does a spider have?")).collect();
    let room = steady_noise(question.len() + 16_000 * 2, 0.000_3);
    let audio: VecDeque<f32> = over(&room, &question, 0).into();
    let mut timelines = Vec::new();
    for suppression in [NoiseSuppression::Auto, NoiseSuppression::Off] {
        let mut call = Call::start(turn_taking(suppression));
        let heard = call.run(audio.clone(), 1_000, |event, _| event.kind.name() != "utterance_committed");
        assert_eq!(call.runtime.counters.noise_suppressed_calls.load(Ordering::Relaxed), 0);
        let timeline: Vec<(u128, String)> =
            heard.events.iter().map(|e| (e.media_time.as_millis(), format!("{:?}", e.kind))).collect();
        let turns = committed(&heard.events);
        assert!(turns.len() == 1 && turns[0].contains("spider"), "{turns:?}");
        timelines.push((timeline, turns));
    }
    assert_eq!(timelines[0], timelines[1]);
}

/// With suppression `on` from the first frame, a question in quiet is still heard word for word.
#[test]
fn suppression_on_in_quiet_costs_no_words() {
    let question: Vec<f32> = silence(1_000).into_iter().chain(spoken("Which river flows through Vienna?")).collect();
    let mut call = Call::start(turn_taking(NoiseSuppression::On));
    let heard = call.run(question.into(), 1_000, |event, _| event.kind.name() != "utterance_committed");
    let turns = committed(&heard.events);
    assert_eq!(turns.len(), 1, "{turns:?}");
    for word in ["which", "river", "flows", "through", "vienna"] {
        assert!(turns[0].contains(word), "{word} in {turns:?}");
    }
}

/// A question in quiet; once it is answered, the next tables start talking (three voices at once, 10 dB
/// below the user) and go on for 7 s; 2.5 s in, the user asks again over them. The other voices open no
/// turn and do not stop the agent's answer; the user's second question does (it is speech over the agent,
/// and not a backchannel) and is one turn with the question's last words and none of theirs.
#[test]
fn a_question_over_other_voices_is_one_turn_with_the_users_words() {
    let room = other_tables(7, SPEECH_RMS * 10f32.powf(-10.0 / 20.0));
    let second = spoken_by_joe("What time does the museum open on Sunday?");
    let (_, heard) = joe_asks_twice(over(&room, &second, 40_000));
    let timeline: Vec<(u128, &str)> = heard.events.iter().map(|e| (e.media_time.as_millis(), e.kind.name())).collect();
    assert_eq!(count(&heard.events, "user.started_speaking"), 2, "{timeline:?}");
    assert_eq!(count(&heard.events, "agent.interrupted"), 1, "{timeline:?}");
    let turns = committed(&heard.events);
    assert_eq!(turns.len(), 2, "{turns:?}");
    // Its words are the user's and none are theirs. A soft last syllable under the room's talk may be cut
    // at the user's last loud one (1 run in 6 heard "…open on sun?"): over the room, the voice check does
    // not hear the user's voice in the mixture (`docs/engine.md`, Noise and other voices).
    assert!(turns[1].contains("open") && turns[1].contains("sun"), "{turns:?} {timeline:?}");
    for theirs in THEIR_WORDS {
        assert!(!turns[1].contains(theirs), "{theirs} in {turns:?}");
    }
}

/// The call, in espeak-ng's voices (the user's and the room's sound alike to the voice encoder: the
/// level alone tells them apart): a question in quiet; once it is answered the next tables talk for 6 s,
/// 10 dB below the user; as they stop, the user asks again. Their talk opens no turn (the user's second
/// turn starts at most `other_voice_grace` before the question, reaching back over the room's last
/// words), and the second turn is the question's words and none of theirs.
#[test]
fn the_next_tables_talk_then_the_user_asks_in_espeak_ng_voices() {
    let mut then = other_tables(6, SPEECH_RMS * 10f32.powf(-10.0 / 20.0));
    then.resize(16_000 * 9, 0.0);
    let question_at = 16_000 * 11 / 2;
    let (_, heard) = asks_twice(
        spoken("What is the capital of France?"),
        over(&then, &spoken("What time does the museum open on Sunday?"), question_at),
    );
    let timeline: Vec<(u128, &str)> = heard.events.iter().map(|e| (e.media_time.as_millis(), e.kind.name())).collect();
    assert_eq!(count(&heard.events, "user.started_speaking"), 2, "{timeline:?}");
    let at_ms = |name: &str, nth: usize| {
        heard.events.iter().filter(|e| e.kind.name() == name).nth(nth).unwrap().media_time.as_millis()
    };
    let asked_ms = at_ms("utterance_committed", 0) + 1_000 + question_at as u128 / 16;
    let grace_ms = VadGateConfig::default().other_voice_grace.as_duration().as_millis();
    assert!(at_ms("user.started_speaking", 1) + grace_ms >= asked_ms, "{timeline:?}");
    let turns = committed(&heard.events);
    assert_eq!(turns.len(), 2, "{turns:?}");
    assert!(turns[1].contains("museum") && turns[1].contains("sunday"), "{turns:?} {timeline:?}");
    for theirs in THEIR_WORDS {
        assert!(!turns[1].contains(theirs), "{theirs} in {turns:?}");
    }
}

/// A question whose last 1.4 s are 14 dB softer than the rest (the user turning away from the
/// microphone), then silence.
fn trailing_off() -> Vec<f32> {
    let mut question = spoken_by_joe("Can you tell me how many months there are in a whole year?");
    let soft_from = question.len() - 22_400;
    for sample in &mut question[soft_from..] {
        *sample *= 10f32.powf(-14.0 / 20.0);
    }
    question.extend(silence(1_500));
    question
}

/// The user's soft last words in a quiet room: a first question heard at the user's level, then one that
/// trails off. By level those windows are another voice's, but nobody else has been heard: they carry the
/// user's speech on (up to 3 s after the last loud syllable), and the soft words stay in the turn. (After
/// the room has talked it is up to the voice checks, whose margin is thin: the same question 1 s after 2 s
/// of the room lost "in a whole year" in 2 of 6 runs, `docs/engine.md`, Noise and other voices.)
#[test]
fn in_a_quiet_room_the_users_soft_last_words_are_theirs() {
    let (call, heard) = joe_asks_twice(trailing_off());
    let turns = committed(&heard.events);
    assert_eq!(turns.len(), 2, "{turns:?}");
    assert!(turns[1].contains("whole") && turns[1].contains("year"), "{turns:?}");
    assert!(call.runtime.counters.voice_checks.load(Ordering::Relaxed) > 0);
}
