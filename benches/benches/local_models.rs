//! The embedded providers on this machine: Whisper tiny.en real-time factor, SmolLM2 time to first token
//! and tokens per second, Piper and espeak-ng time to first audio and real-time factor. Medians of a few
//! runs after a warm-up; `cargo bench -p confab-benches --bench local_models`. Under `cargo test` (no
//! `--bench`) one run each.

use std::time::{Duration, Instant};

use confab_benches::espeak;
use confab_engine::providers::llm::{ChatMessage, ChatRequest, LanguageModel, LlmEvent};
use confab_engine::providers::local_llm::LocalLlm;
use confab_engine::providers::piper_tts::PiperTts;
use confab_engine::providers::tts::EspeakVoice;
use confab_models::whisper::WhisperStt;

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn speech(text: &str) -> Vec<f32> {
    espeak(text, 160)
}

fn main() {
    let runs = if std::env::args().any(|a| a == "--bench") { 5 } else { 1 };
    let dir = confab_models::default_models_dir();
    let sentence = "The library opens at nine o'clock tomorrow morning and closes at six in the evening.";

    let audio = speech(sentence);
    let seconds = audio.len() as f64 / 16_000.0;
    let mut whisper = WhisperStt::load(&dir).unwrap();
    whisper.transcribe(&audio).unwrap();
    let stt: Vec<f64> = (0..runs)
        .map(|_| {
            let t = Instant::now();
            whisper.transcribe(&audio).unwrap();
            t.elapsed().as_secs_f64()
        })
        .collect();
    let stt = median(stt);
    println!("whisper tiny.en: {stt:.3} s for {seconds:.2} s of speech (real-time factor {:.2})", stt / seconds);

    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let llm = LocalLlm::load(&dir).unwrap();
    let request = ChatRequest {
        model: "smollm2".into(),
        messages: vec![
            ChatMessage::new("system", "You are a helpful assistant. Answer in one short sentence."),
            ChatMessage::new("user", "When does the library open tomorrow?"),
        ],
        tools: vec![],
        max_tokens: 48,
        temperature: 0.0,
        stop: vec![],
    };
    let mut first = Vec::new();
    let mut rates = Vec::new();
    for run in 0..=runs {
        let (ttft, pieces, total) = runtime.block_on(async {
            let started = Instant::now();
            let mut stream = llm.stream(request.clone());
            let (mut ttft, mut pieces) = (None, 0usize);
            while let Some(event) = stream.recv().await {
                if let Ok(LlmEvent::Text(_)) = event {
                    ttft.get_or_insert(started.elapsed());
                    pieces += 1;
                }
            }
            (ttft.unwrap_or_default(), pieces, started.elapsed())
        });
        if run > 0 {
            first.push(ttft.as_secs_f64());
            rates.push(pieces as f64 / (total - ttft).max(Duration::from_millis(1)).as_secs_f64());
        }
    }
    println!(
        "smollm2-135m: time to first token {:.3} s, {:.1} tokens per second after it",
        median(first),
        median(rates)
    );

    let piper = PiperTts::load(&dir).unwrap();
    piper.render("Warm up.").unwrap();
    let reply = "The library opens at nine tomorrow morning.";
    let mut piper_times = Vec::new();
    let mut piper_len = 0.0;
    for _ in 0..runs {
        let t = Instant::now();
        let audio = piper.render(reply).unwrap();
        piper_times.push(t.elapsed().as_secs_f64());
        piper_len = audio.len() as f64 / 16_000.0;
    }
    let piper_time = median(piper_times);
    println!(
        "piper en_US joe: first audio after {piper_time:.3} s (whole sentence), {piper_len:.2} s of audio, real-time factor {:.2}",
        piper_time / piper_len
    );

    let espeak = EspeakVoice::default();
    let mut espeak_times = Vec::new();
    let mut espeak_len = 0.0;
    for _ in 0..runs {
        let t = Instant::now();
        let audio = runtime.block_on(espeak.render(reply)).unwrap();
        espeak_times.push(t.elapsed().as_secs_f64());
        espeak_len = audio.len() as f64 / 16_000.0;
    }
    let espeak_time = median(espeak_times);
    println!(
        "espeak-ng: first audio after {espeak_time:.3} s (whole sentence), {espeak_len:.2} s of audio, real-time factor {:.2}",
        espeak_time / espeak_len
    );
}
