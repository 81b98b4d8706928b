//! Hearing in noise (issue 54's benchmark): twenty questions in Piper's voice (3.5 s apart), heard on the
//! stepped runtime by the local models (Silero, Smart Turn, Moonshine) — in quiet, over steady noise
//! (sox's pink + brown noise: a fan and a street) at 10, 5 and 0 dB below the speech, and over three
//! other voices talking at once (espeak-ng, 10 dB below the user) from the second question on — each with
//! the noise suppressor `off` and `auto` (the default), and over the other voices also with every voice
//! taken for the user's (`other_voices: hear`; the other cases `ignore`, the default, `core::other_voices`).
//! Reported per case: the word error of the user's committed turns against the questions, and how many turns were
//! committed. The language model is a local OpenAI-compatible server that answers "Okay." at once, so only
//! hearing costs time. Piper's voice differs a little from run to run (its model samples noise); the cases of one run
//! hear the same recording.
//!
//! Command: `cargo bench -p confab-benches --bench hearing_in_noise -- --bench [--voice=espeak]
//! [--verbose]` (`--verbose`: each case's turns, and its timeline of the user's speech and commits). Under
//! `cargo test` it hears two questions in quiet and at 5 dB.

use std::collections::VecDeque;

use confab_benches::answering::{responder, serve_answer};
use confab_benches::{espeak_as, steady_noise, word_errors};
use confab_engine::audio::denoise::NoiseSuppression;
use confab_engine::conversation::ConversationConfig;
use confab_engine::core::endpoint::EndpointConfig;
use confab_engine::core::other_voices::OtherVoices;
use confab_engine::providers::piper_tts::PiperTts;
use confab_engine::runtime::{CallRuntime, RuntimeConfig, SteppedRuntime};
use confab_engine::time::MediaTime;
use confab_engine::{ConversationEvent, EventKind};

const QUESTIONS: [&str; 20] = [
    "What is the capital of France?",
    "Can you book a table for four people tonight?",
    "Which river flows through the city of Vienna?",
    "How many days are in a week?",
    "What time does the museum open on Sunday?",
    "How many legs does a spider have?",
    "What is the largest planet in our solar system?",
    "Please remind me to call my sister tomorrow.",
    "How many months are in a year?",
    "What do bees make?",
    "Is there a pharmacy near the train station?",
    "What colour is fresh grass?",
    "Which animal is called the king of the jungle?",
    "How far is it from Berlin to Munich?",
    "What is the capital of Germany?",
    "Can I pay for the tickets by card?",
    "How many sides does a triangle have?",
    "What planet do we live on?",
    "Where can I park my car for the night?",
    "What is the chemical symbol for water?",
];

/// What the other tables say (three voices at once, each its own espeak-ng voice).
const OTHER_TABLES: [(&str, &str); 3] = [
    (
        "en-gb+m3",
        "The data can be controlled from the second office, and the meeting on Thursday was moved to the \
         afternoon because the manager is travelling. We should order more paper before the end of the month.",
    ),
    (
        "en-us+f2",
        "I told her the flat was too small for the three of them, but she said the garden made up for it. \
         Anyway, the kids love the school and the bus stops right outside the door every morning.",
    ),
    (
        "en+m5",
        "The game went into extra time and nobody could believe the goal in the last minute. The coach said \
         the team played the best football of the season, and the fans sang all the way home.",
    ),
];

/// Each question starts this long after the one before.
const QUESTION_EVERY: usize = 16_000 * 7 / 2;
/// Silence (or noise alone) before the first question.
const LEAD: usize = 16_000 * 2;

fn rms(samples: &[f32]) -> f32 {
    (samples.iter().map(|s| s * s).sum::<f32>() / samples.len().max(1) as f32).sqrt()
}

/// RMS of the audible part of speech (samples above −50 dBFS in 20 ms frames).
fn speech_rms(speech: &[f32]) -> f32 {
    let audible: Vec<f32> = speech.chunks(320).filter(|f| rms(f) > 0.003).flatten().copied().collect();
    rms(&audible)
}

/// What is heard under the questions.
#[derive(Clone, Copy)]
enum Background {
    Quiet,
    /// Steady pink + brown noise this many dB below the speech, from the start.
    Steady(f32),
    /// Three other voices at once this many dB below the user, from the second question on.
    Voices(f32),
}

impl Background {
    fn name(self) -> String {
        match self {
            Background::Quiet => "quiet".into(),
            Background::Steady(db) => format!("steady noise, {db} dB SNR"),
            Background::Voices(db) => format!("three other voices, {db} dB below"),
        }
    }
}

/// The questions (each scaled to −20 dBFS of speech) over `background`.
fn recording(questions: &[Vec<f32>], background: Background, voices: &[f32]) -> Vec<f32> {
    let mut audio = vec![0.0f32; LEAD + QUESTION_EVERY * questions.len() + 16_000 * 2];
    let speech_level = 0.1;
    for (i, question) in questions.iter().enumerate() {
        let gain = speech_level / speech_rms(question);
        let at = LEAD + i * QUESTION_EVERY;
        for (out, s) in audio[at..].iter_mut().zip(question) {
            *out += s * gain;
        }
    }
    let (noise, from, db) = match background {
        Background::Quiet => return audio,
        Background::Steady(db) => (steady_noise(audio.len()), 0, db),
        Background::Voices(db) => (voices.to_vec(), LEAD + QUESTION_EVERY - 16_000, db),
    };
    let gain = speech_level * 10f32.powf(-db / 20.0) / rms(&noise);
    for (out, n) in audio[from..].iter_mut().zip(noise.iter().cycle()) {
        *out += n * gain;
    }
    audio
}

/// The other tables: three voices summed, each at the same level.
fn other_tables() -> Vec<f32> {
    let voices: Vec<Vec<f32>> = OTHER_TABLES.iter().map(|(voice, text)| espeak_as(voice, text, 170)).collect();
    let len = voices.iter().map(Vec::len).max().unwrap();
    let mut sum = vec![0.0f32; len];
    for voice in &voices {
        let gain = 1.0 / speech_rms(voice);
        for (out, s) in sum.iter_mut().zip(voice.iter().cycle()) {
            *out += s * gain;
        }
    }
    sum
}

/// How a call hears: its noise suppression, and whether every voice is the user's.
#[derive(Clone, Copy)]
struct Hearing {
    name: &'static str,
    suppression: NoiseSuppression,
    other_voices: OtherVoices,
}

const OFF: Hearing = Hearing { name: "off", suppression: NoiseSuppression::Off, other_voices: OtherVoices::Ignore };
const AUTO: Hearing = Hearing { name: "auto", suppression: NoiseSuppression::Auto, other_voices: OtherVoices::Ignore };
const EVERY_VOICE: Hearing = Hearing {
    name: "auto, every voice the user's",
    suppression: NoiseSuppression::Auto,
    other_voices: OtherVoices::Hear,
};

/// The call's events: who spoke when, and the user's committed turns.
fn hear(base: &str, audio: &[f32], hearing: Hearing) -> Vec<ConversationEvent> {
    let mut runtime = SteppedRuntime::new(&RuntimeConfig::new(confab_models::default_models_dir(), 2)).unwrap();
    let conversation = ConversationConfig {
        endpoint: EndpointConfig { min_delay: MediaTime::from_millis(500), max_delay: MediaTime::from_millis(1_000) },
        noise_suppression: hearing.suppression,
        other_voices: hearing.other_voices,
        ..ConversationConfig::default()
    };
    let mut session = runtime.open_session(conversation, Some(responder(base))).unwrap();
    let mut script: VecDeque<f32> = audio.iter().copied().collect();
    let mut events: Vec<ConversationEvent> = Vec::new();
    for _ in 0..audio.len() / 320 + 500 {
        for _ in 0..320 {
            session.input.push(script.pop_front().unwrap_or(0.0)).unwrap();
        }
        runtime.step();
        while session.output.pop().is_ok() {}
        events.extend(session.events.try_iter());
    }
    runtime.close_session(session.id);
    events
}

/// The user's committed turns among `events`.
fn committed_turns(events: &[ConversationEvent]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::UtteranceCommitted { text } => Some(text.clone()),
            _ => None,
        })
        .collect()
}

/// `events` as a timeline a person can read against the questions' starts (every 3.5 s from 2 s): when
/// the user started and stopped speaking (by the VAD) and what each committed turn said.
fn timeline(events: &[ConversationEvent]) -> String {
    events
        .iter()
        .filter_map(|e| {
            let at = e.media_time.as_secs_f64();
            match &e.kind {
                EventKind::UserStartedSpeaking => Some(format!("{at:.2} started")),
                EventKind::UserStoppedSpeaking => Some(format!("{at:.2} stopped")),
                EventKind::UtteranceCommitted { text } => Some(format!("{at:.2} committed {text:?}")),
                _ => None,
            }
        })
        .collect::<Vec<_>>()
        .join("\n    ")
}

fn main() {
    let bench = std::env::args().any(|a| a == "--bench");
    let count = if bench { QUESTIONS.len() } else { 2 };
    let io = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let _guard = io.enter();
    let base = io.block_on(serve_answer("Okay."));
    let piper = PiperTts::load(&confab_models::default_models_dir()).expect("models are fetched");
    let espeak_voice = std::env::args().any(|a| a == "--voice=espeak");
    let questions: Vec<Vec<f32>> = QUESTIONS[..count]
        .iter()
        .map(|q| if espeak_voice { espeak_as("en-us", q, 160) } else { piper.render(q).unwrap() })
        .collect();
    let reference = QUESTIONS[..count].join(" ");
    let voices = other_tables();
    let backgrounds: Vec<Background> = if bench {
        vec![
            Background::Quiet,
            Background::Steady(10.0),
            Background::Steady(5.0),
            Background::Steady(0.0),
            Background::Voices(10.0),
        ]
    } else {
        vec![Background::Quiet, Background::Steady(5.0)]
    };
    println!("| background | noise suppression | word error | turns committed (of {count} questions) |");
    println!("|---|---|---|---|");
    for background in backgrounds {
        let audio = recording(&questions, background, &voices);
        let hearings = match background {
            Background::Voices(_) => vec![OFF, AUTO, EVERY_VOICE],
            _ => vec![OFF, AUTO],
        };
        for hearing in hearings {
            let events = hear(&base, &audio, hearing);
            let turns = committed_turns(&events);
            let (errors, words) = word_errors(&reference, &turns.join(" "));
            println!(
                "| {} | {} | {:.1}% ({errors}/{words}) | {} |",
                background.name(),
                hearing.name,
                100.0 * errors as f64 / words.max(1) as f64,
                turns.len()
            );
            if std::env::args().any(|a| a == "--verbose") {
                println!("  heard: {turns:?}");
                println!("  timeline:\n    {}", timeline(&events));
            }
        }
    }
}
