//! The embedded providers on this machine: Moonshine Base (one and two threads; greedy and with its beam) and Whisper tiny.en
//! real-time factor, each local language model's time to first token (cold, and with the system prompt's
//! state kept) and tokens per second, a burst of requests on the default model's queue, Piper and
//! espeak-ng time to first audio and real-time factor. Medians of a few runs after a warm-up;
//! `cargo bench -p confab-benches --bench local_models`. Under `cargo test` (no `--bench`) one run each.

use std::time::{Duration, Instant};

use confab_benches::{espeak, rss_bytes};
use confab_engine::providers::llm::{ChatMessage, ChatRequest, LanguageModel, LlmEvent};
use confab_engine::providers::local_llm::LocalLlm;
use confab_engine::providers::piper_tts::PiperTts;
use confab_engine::providers::tts::EspeakVoice;
use confab_models::chat_lm::{ChatLm, LocalChatModel, Message};
use confab_models::moonshine::{BEAM_WIDTH, MoonshineStt};
use confab_models::whisper::WhisperStt;

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// Seconds until the model's first token for `question` after `system`.
fn first_token(model: &mut ChatLm, system: &str, question: &str) -> f64 {
    let turns = [Message::new("system", system), Message::new("user", question)];
    let started = Instant::now();
    let mut first = None;
    model
        .generate(&turns, &[], 1, 0.0, &[], &mut |_| {
            first.get_or_insert(started.elapsed());
            true
        })
        .unwrap();
    first.unwrap_or_else(|| started.elapsed()).as_secs_f64()
}

/// Resident memory the default language model adds: its weights (mapped from its file, resident once read)
/// with its first context, then each further context of the same file (as another model queue would
/// have: the weights are shared).
fn language_model_memory(dir: &std::path::Path) {
    let mib = |bytes: u64| bytes as f64 / (1024.0 * 1024.0);
    let before = rss_bytes();
    let mut first = ChatLm::load(dir, LocalChatModel::DEFAULT).unwrap();
    first_token(&mut first, SYSTEM, "What is the capital of France?");
    let one = rss_bytes();
    let mut second = ChatLm::load(dir, LocalChatModel::DEFAULT).unwrap();
    first_token(&mut second, SYSTEM, "What is the capital of France?");
    let two = rss_bytes();
    println!(
        "{}: {:.0} MiB resident with its first context, {:.0} MiB more for a second context",
        LocalChatModel::DEFAULT.name(),
        mib(one.saturating_sub(before)),
        mib(two.saturating_sub(one))
    );
}

/// The system prompt every question here is asked under.
const SYSTEM: &str = "You are a helpful assistant. Answer in one short sentence.";

/// `question` for `model`, under [`SYSTEM`], answered greedily in at most 48 tokens.
fn short_answer(model: &str, question: &str) -> ChatRequest {
    ChatRequest {
        model: model.into(),
        messages: vec![ChatMessage::new("system", SYSTEM), ChatMessage::new("user", question)],
        tools: vec![],
        max_tokens: 48,
        temperature: 0.0,
        stop: vec![],
    }
}

/// Twelve calls ask the default model at once, then twelve again with every other reply discarded as soon
/// as it is asked for (as preemptive generation discards one when the user speaks on): the queue's
/// answered, refused and abandoned requests, the answered ones' time to first token, the burst's length.
fn burst(runtime: &tokio::runtime::Runtime, llm: &LocalLlm) {
    use confab_engine::providers::local_llm::queue_counters;
    use std::sync::atomic::Ordering;
    const CALLS: usize = 12;
    let questions = ["What is the capital of France?", "How many days are in a week?", "What do bees make?"];
    for discard_half in [false, true] {
        let abandoned_before = queue_counters().abandoned.load(Ordering::SeqCst);
        let started = Instant::now();
        let streams: Vec<_> = (0..CALLS)
            .map(|call| {
                let stream = llm.stream(short_answer(llm.name(), questions[call % questions.len()]));
                (!(discard_half && call % 2 == 1)).then_some(stream)
            })
            .collect();
        let (mut first_tokens, mut refused) = (Vec::new(), 0);
        runtime.block_on(async {
            for mut stream in streams.into_iter().flatten() {
                let mut first = None;
                while let Some(event) = stream.recv().await {
                    match event {
                        Ok(LlmEvent::Text(_)) => {
                            first.get_or_insert(started.elapsed());
                        }
                        Ok(_) => {}
                        Err(_) => refused += 1,
                    }
                }
                first_tokens.extend(first.map(|t| t.as_secs_f64()));
            }
        });
        let total = started.elapsed().as_secs_f64();
        let answered = first_tokens.len();
        let longest = first_tokens.iter().copied().fold(0.0, f64::max);
        println!(
            "burst of {CALLS} requests{}: {answered} answered (first token p50 {:.3} s, longest {longest:.3} s), {refused} \
             refused at once, {} abandoned unstarted; all done in {total:.2} s",
            if discard_half { ", every other one discarded at once" } else { "" },
            median(first_tokens),
            queue_counters().abandoned.load(Ordering::SeqCst) - abandoned_before,
        );
    }
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
    let timed = |transcribe: &mut dyn FnMut() -> String| {
        transcribe();
        median(
            (0..runs)
                .map(|_| {
                    let t = Instant::now();
                    transcribe();
                    t.elapsed().as_secs_f64()
                })
                .collect(),
        )
    };
    for threads in [1, 2] {
        let mut moonshine = MoonshineStt::load(&dir, threads).unwrap();
        for width in [1, BEAM_WIDTH] {
            moonshine.set_beam_width(width);
            let stt = timed(&mut || moonshine.transcribe(&audio).unwrap());
            println!(
                "moonshine base, {threads} thread(s), beam {width}: {stt:.3} s for {seconds:.2} s of speech (real-time factor {:.3})",
                stt / seconds
            );
        }
    }
    let mut whisper = WhisperStt::load(&dir).unwrap();
    let stt = timed(&mut || whisper.transcribe(&audio).unwrap());
    println!("whisper tiny.en: {stt:.3} s for {seconds:.2} s of speech (real-time factor {:.2})", stt / seconds);

    println!("llama.cpp: {}", confab_models::chat_lm::system_info());
    language_model_memory(&dir);

    // Time to first token of each model itself: the whole prompt evaluated, then only the user message
    // after the kept system-prompt state; then through the provider, with tokens per second.
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    for which in LocalChatModel::ALL {
        let mut chat = ChatLm::load(&dir, which).unwrap();
        let system = SYSTEM;
        let questions =
            ["When does the library open tomorrow?", "What is the capital of France?", "How many days are in a week?"];
        let mut prompt_rates = Vec::new();
        let cold = median(
            (0..=runs)
                .map(|i| {
                    chat.forget_prefixes();
                    let seconds = first_token(&mut chat, system, questions[i % questions.len()]);
                    prompt_rates.push(chat.last_evaluated() as f64 / seconds);
                    seconds
                })
                .collect(),
        );
        let mut question_tokens = Vec::new();
        let warm = median(
            (0..=runs)
                .map(|i| {
                    let seconds = first_token(&mut chat, system, questions[(i + 1) % questions.len()]);
                    question_tokens.push(chat.last_evaluated() as f64);
                    seconds
                })
                .collect(),
        );
        println!(
            "{}: time to first token {cold:.3} s with the whole prompt ({:.0} prompt tokens per second), {warm:.3} s after the kept system prompt ({:.0} tokens of question)",
            which.name(),
            median(prompt_rates),
            median(question_tokens)
        );

        drop(chat);
        let llm = LocalLlm::load(&dir, which.name()).unwrap();
        let request = short_answer(which.name(), "When does the library open tomorrow?");
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
            "{}: time to first token {:.3} s, {:.1} tokens per second after it",
            which.name(),
            median(first),
            median(rates)
        );
    }

    burst(&runtime, &LocalLlm::load(&dir, "").unwrap());

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
