//! The embedded speech models on real audio: espeak-ng and Piper speak sentences, Whisper tiny.en
//! (converted from CTranslate2 at fetch time, run with candle) reads them back with at most 20% word error.

mod common;

use common::speak;

use confab_engine::providers::piper_tts::PiperTts;
use confab_models::whisper::WhisperStt;

fn words(text: &str) -> Vec<String> {
    text.to_lowercase()
        .split(|c: char| !c.is_alphanumeric() && c != '\'')
        .filter(|w| !w.is_empty())
        .map(str::to_string)
        .collect()
}

/// Word error rate: word-level edit distance over the reference length.
fn word_error_rate(reference: &str, hypothesis: &str) -> f32 {
    let (r, h) = (words(reference), words(hypothesis));
    let mut row: Vec<usize> = (0..=h.len()).collect();
    for (i, rw) in r.iter().enumerate() {
        let mut previous = row[0];
        row[0] = i + 1;
        for (j, hw) in h.iter().enumerate() {
            let substitution = previous + usize::from(rw != hw);
            previous = row[j + 1];
            row[j + 1] = substitution.min(row[j] + 1).min(row[j + 1] + 1);
        }
    }
    row[h.len()] as f32 / r.len().max(1) as f32
}

const SENTENCES: [&str; 5] = [
    "The library opens at nine o'clock tomorrow morning.",
    "Please book a table for two people tonight.",
    "How much does a ticket to the museum cost?",
    "I would like to change my delivery address.",
    "The weather will be sunny and warm this afternoon.",
];

#[test]
fn word_error_rate_counts_edits() {
    assert_eq!(word_error_rate("a b c d", "a b c d"), 0.0);
    assert_eq!(word_error_rate("a b c d", "a x c"), 0.5);
}

/// Word error rate over all the sentences (errors summed, over all reference words).
fn corpus_word_error_rate(voice: &str, speak: &dyn Fn(&str) -> Vec<f32>) -> f32 {
    let mut whisper = WhisperStt::load(&confab_models::default_models_dir()).expect("models are fetched");
    let (mut errors, mut total) = (0.0, 0.0);
    for sentence in SENTENCES {
        let heard = whisper.transcribe(&speak(sentence)).unwrap();
        let wer = word_error_rate(sentence, &heard);
        eprintln!("{voice}: {sentence:?} → {heard:?} (WER {wer:.2})");
        let n = words(sentence).len() as f32;
        errors += wer * n;
        total += n;
    }
    errors / total
}

#[test]
fn whisper_reads_espeak_speech() {
    let wer = corpus_word_error_rate("espeak-ng", &speak);
    assert!(wer <= 0.2, "word error rate {wer:.3} over {} sentences", SENTENCES.len());
}

#[test]
fn whisper_reads_piper_speech() {
    let piper = PiperTts::load(&confab_models::default_models_dir()).unwrap();
    let wer = corpus_word_error_rate("piper", &|text| piper.render(text).unwrap());
    assert!(wer <= 0.2, "word error rate {wer:.3} over {} sentences", SENTENCES.len());
}
