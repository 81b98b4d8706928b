//! The voice encoder (Resemblyzer's GE2E, `confab_models::voice_encoder`) on real speech: one natural
//! voice (Piper's joe) saying different questions points the same way, and espeak-ng's voices — the test
//! rooms' other tables — point elsewhere, whole questions and 1.6 s stretches alike; one short stretch
//! and the same stretch inside a longer utterance agree; a file that is not the checkpoint is refused.

mod common;

use common::speak_as;
use confab_engine::providers::piper_tts::PiperTts;
use confab_models::voice_encoder::{PARTIAL_SAMPLES, VOICEPRINT, VoiceEncoder, Voiceprint};

const JOE: [&str; 4] = [
    "What time does the museum open on Sunday?",
    "Can you book a table for four people tonight?",
    "Which river flows through the city of Vienna?",
    "I would like to change my flight to Tuesday.",
];
const ROOM: [&str; 2] = ["The data can be controlled from the other office.", "We went to the park on Saturday."];
const ROOM_VOICES: [&str; 3] = ["en-us", "en-gb+f3", "en-us+m3"];

fn encoder() -> VoiceEncoder {
    VoiceEncoder::load(&confab_models::default_models_dir()).expect("models are fetched")
}

#[test]
fn one_voice_points_one_way_and_the_rooms_voices_elsewhere() {
    let mut encoder = encoder();
    let piper = PiperTts::load(&confab_models::default_models_dir()).expect("models are fetched");
    let joe: Vec<Voiceprint> = JOE.iter().map(|q| encoder.embed_utterance(&piper.render(q).unwrap())).collect();
    let room: Vec<Voiceprint> = ROOM_VOICES
        .iter()
        .flat_map(|voice| ROOM.iter().map(|text| speak_as(voice, text)))
        .map(|audio| encoder.embed_utterance(&audio))
        .collect();
    for print in joe.iter().chain(&room) {
        assert_eq!(print.0.len(), VOICEPRINT);
        let norm: f32 = print.0.iter().map(|v| v * v).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-4, "unit vectors: {norm}");
    }
    let profile = Voiceprint::mean(&joe[..2]).unwrap();
    let same: Vec<f32> = joe[2..].iter().map(|p| profile.similarity(p)).collect();
    let other: Vec<f32> = room.iter().map(|p| profile.similarity(p)).collect();
    eprintln!("joe's profile against joe's other questions {same:?}, against the room {other:?}");
    let (least_same, most_other) =
        (same.iter().copied().fold(1.0, f32::min), other.iter().copied().fold(-1.0, f32::max));
    assert!(least_same > 0.75, "joe's questions are one voice: {same:?}");
    assert!(most_other < 0.7, "the room is not joe: {other:?}");
    assert!(least_same - most_other > 0.1, "joe {same:?} against the room {other:?}");
}

#[test]
fn a_short_stretch_is_the_same_partial_inside_a_longer_utterance() {
    let mut encoder = encoder();
    let audio = speak_as("en-us", "Which river flows through the city of Vienna?");
    assert!(audio.len() > PARTIAL_SAMPLES);
    // An utterance of exactly one partial is that partial.
    let stretch = &audio[..PARTIAL_SAMPLES];
    let alone = encoder.embed_partial(stretch);
    let as_utterance = encoder.embed_utterance(stretch);
    assert!(alone.similarity(&as_utterance) > 0.9999, "{}", alone.similarity(&as_utterance));
    // Half a second of it is still this voice, less surely.
    let short = encoder.embed_partial(&audio[..PARTIAL_SAMPLES / 3]);
    assert!(short.similarity(&alone) > 0.5, "{}", short.similarity(&alone));
}

#[test]
fn a_file_that_is_not_the_checkpoint_is_refused_with_its_reason() {
    let path = std::env::temp_dir().join(format!("confab-not-a-checkpoint-{}.pt", std::process::id()));
    std::fs::write(&path, b"PK\x03\x04 a zip archive, not the legacy format").unwrap();
    let error = VoiceEncoder::from_checkpoint(&path).err().expect("refused").to_string();
    let _ = std::fs::remove_file(&path);
    assert!(error.contains("not a legacy PyTorch checkpoint"), "{error}");
}
