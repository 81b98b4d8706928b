//! The model wrappers on real speech generated with espeak-ng: Silero batched across sessions equals
//! Silero one session at a time, and Smart Turn tells a finished question from a cut-off sentence (the
//! prepared copy it runs agreeing with the package's own model).

mod common;

use common::speak;

use confab_models::paths::SMART_TURN;
use confab_models::silero::{SileroState, SileroVad, WINDOW};
use confab_models::smart_turn::{SmartTurn, prepare};

#[test]
fn batched_vad_equals_single_session_vad() {
    let dir = confab_models::default_models_dir();
    let clips = [
        speak("The quick brown fox jumps over the lazy dog"),
        speak("Can you hear me now"),
        speak("Seven eight nine ten"),
    ];
    let windows = clips.iter().map(|c| c.len() / WINDOW).min().unwrap();

    let mut single = SileroVad::load(&dir, 1, 1).unwrap();
    let mut expected = vec![vec![0.0f32; windows]; clips.len()];
    for (clip, out) in clips.iter().zip(expected.iter_mut()) {
        let mut state = SileroState::default();
        for w in 0..windows {
            let mut p = [0.0];
            single.infer(&[&clip[w * WINDOW..(w + 1) * WINDOW]], &mut [&mut state], &mut p).unwrap();
            out[w] = p[0];
        }
    }

    let mut batched = SileroVad::load(&dir, 8, 1).unwrap();
    let mut states = vec![SileroState::default(); clips.len()];
    let mut speech_windows = 0;
    for w in 0..windows {
        let batch: Vec<&[f32]> = clips.iter().map(|c| &c[w * WINDOW..(w + 1) * WINDOW]).collect();
        let mut state_refs: Vec<&mut SileroState> = states.iter_mut().collect();
        let mut p = vec![0.0; clips.len()];
        batched.infer(&batch, &mut state_refs, &mut p).unwrap();
        for (s, prob) in p.iter().enumerate() {
            assert!((prob - expected[s][w]).abs() < 1e-4, "session {s} window {w}: {prob} vs {}", expected[s][w]);
            speech_windows += usize::from(*prob > 0.5);
        }
    }
    assert!(speech_windows > windows, "the clips are speech: {speech_windows} of {} windows", windows * clips.len());
}

#[test]
fn smart_turn_tells_a_finished_question_from_a_cut_off_sentence() {
    let mut turn = SmartTurn::load(&confab_models::default_models_dir(), 1).unwrap();
    let finished = turn.predict(&speak("What time do you open tomorrow?")).unwrap();
    let cut_off = turn.predict(&speak("I would like to order a")).unwrap();
    eprintln!("finished {finished} cut off {cut_off}");
    assert!((0.0..=1.0).contains(&finished) && (0.0..=1.0).contains(&cut_off));
    assert!(finished > 0.5, "finished question: {finished}");
    assert!(cut_off < finished, "cut-off {cut_off} vs finished {finished}");
}

#[test]
fn the_prepared_turn_model_gives_the_original_verdicts_on_speech() {
    let models = confab_models::default_models_dir();
    let mut prepared = SmartTurn::load(&models, 1).unwrap();
    let mut original = SmartTurn::load_file(&models, SMART_TURN, 1).unwrap();
    let sentences = [
        "What time do you open tomorrow?",
        "I would like to order a",
        "Can you tell me how many days are in a week?",
        "So what I was thinking is that maybe we could",
        "Thanks, that is all.",
        "The capital of France is",
    ];
    for sentence in sentences {
        let audio = speak(sentence);
        let (want, got) = (original.predict(&audio).unwrap(), prepared.predict(&audio).unwrap());
        eprintln!("{sentence:?}: original {want:.4}, prepared {got:.4}");
        assert!((want - got).abs() <= prepare::TOLERANCE, "{sentence:?}: original {want}, prepared {got}");
        assert_eq!(want > 0.5, got > 0.5, "{sentence:?}: original {want}, prepared {got}");
    }
}
