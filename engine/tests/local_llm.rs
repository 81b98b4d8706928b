//! SmolLM2-135M-Instruct from its GGUF: streams a non-empty answer to a short question and stops, stops
//! early when the stream is dropped, and reuses kept prompt states without changing the answer.

use confab_engine::providers::llm::{ChatMessage, ChatRequest, LanguageModel, LlmEvent};
use confab_engine::providers::local_llm::LocalLlm;
use confab_models::smollm::{SmolLm, Turn};

fn request(max_tokens: u32) -> ChatRequest {
    ChatRequest {
        model: "smollm2-135m-instruct".into(),
        messages: vec![
            ChatMessage::new("system", "You are a helpful assistant. Answer in one short sentence."),
            ChatMessage::new("user", "What is the capital of France?"),
        ],
        tools: vec![],
        max_tokens,
        temperature: 0.0,
        stop: vec![],
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_an_answer_and_stops() {
    let llm = LocalLlm::load(&confab_models::default_models_dir()).expect("models are fetched");
    let mut stream = llm.stream(request(64));
    let (mut pieces, mut text, mut done) = (0, String::new(), None);
    while let Some(event) = stream.recv().await {
        match event.unwrap() {
            LlmEvent::Text(piece) => {
                pieces += 1;
                text.push_str(&piece);
            }
            LlmEvent::Done { metrics, .. } => done = Some(metrics),
            LlmEvent::ToolCall(_) => panic!("no tools were offered"),
        }
    }
    eprintln!("answer: {text:?} in {pieces} pieces, {done:?}");
    assert!(pieces > 1, "the answer streams");
    assert!(!text.trim().is_empty());
    assert!(text.contains("Paris"), "{text:?}");
    assert!(!text.contains("<|im_end|>") && !text.contains("<|im_start|>"), "special tokens are not text: {text:?}");
    let metrics = done.expect("the stream ends with Done");
    assert!(metrics.time_to_first.unwrap() <= metrics.duration);

    // Dropping the stream stops generation: the model is free for the next request.
    let mut long = llm.stream(request(400));
    assert!(matches!(long.recv().await, Some(Ok(LlmEvent::Text(_)))));
    drop(long);
    let mut again = llm.stream(request(8));
    let mut finished = false;
    while let Some(event) = again.recv().await {
        finished |= matches!(event, Ok(LlmEvent::Done { .. }));
    }
    assert!(finished, "the next request is answered");
}

#[test]
fn generation_stops_at_the_first_piece_nobody_takes() {
    // A dropped stream's sender refuses the next piece: `generate` must return there, not run to its limit.
    let mut model = confab_models::smollm::SmolLm::load(&confab_models::default_models_dir()).expect("models");
    let turns = [Turn { role: "user", content: "Count from one to one hundred." }];
    let mut pieces = 0;
    model
        .generate(&turns, 400, 0.0, &[], &mut |_| {
            pieces += 1;
            pieces < 3
        })
        .unwrap();
    assert_eq!(pieces, 3, "no piece is decoded after the receiver refused one");
}

fn reply(model: &mut confab_models::smollm::SmolLm, turns: &[(&str, &str)]) -> String {
    let turns: Vec<Turn> = turns.iter().map(|(role, content)| Turn { role, content }).collect();
    let mut text = String::new();
    model
        .generate(&turns, 64, 0.0, &[], &mut |piece| {
            text.push_str(piece);
            true
        })
        .unwrap();
    text
}

/// A conversation's next turn evaluates only the new message (the kept state covers the previous prompt and
/// reply), and answers exactly as a cold run of the whole prompt does.
#[test]
fn kept_prompt_state_gives_the_cold_answer() {
    const SYSTEM: &str = "You are a helpful assistant. Answer in one short sentence.";
    let mut model = SmolLm::load(&confab_models::default_models_dir()).expect("models are fetched");
    let first = [("system", SYSTEM), ("user", "What is the capital of France?")];
    let answer = reply(&mut model, &first);
    let first_prompt = model.last_evaluated();
    assert!(answer.contains("Paris"), "{answer:?}");

    let second = [
        ("system", SYSTEM),
        ("user", "What is the capital of France?"),
        ("assistant", answer.as_str()),
        ("user", "And of Italy?"),
    ];
    let warm = reply(&mut model, &second);
    let warm_evaluated = model.last_evaluated();
    // "<|im_end|>\n<|im_start|>user\nAnd of Italy?<|im_end|>\n<|im_start|>assistant\n": a dozen tokens.
    assert!(warm_evaluated <= 16, "evaluated {warm_evaluated} of the second prompt");

    model.forget_prefixes();
    let cold = reply(&mut model, &second);
    assert!(model.last_evaluated() > first_prompt + warm_evaluated, "the cold run evaluates the whole prompt");
    assert_eq!(warm, cold, "the kept state changes nothing");

    // Another call with the same system prompt starts from the system prompt's state.
    let other = [("system", SYSTEM), ("user", "How many days are in a week?")];
    reply(&mut model, &other);
    assert!(model.last_evaluated() < first_prompt, "{} of {first_prompt}", model.last_evaluated());
}

/// A reply does not loop: the misheard question that once made the model repeat "the opposite of the
/// opposite of heart" until the token bound (at the responder's temperature) now gets a reply that ends,
/// with no five-word run said three times.
#[test]
fn a_reply_does_not_talk_itself_into_a_loop() {
    let mut model = SmolLm::load(&confab_models::default_models_dir()).expect("models are fetched");
    let turns = [
        Turn { role: "system", content: "You are a helpful assistant. Answer in one short sentence." },
        Turn { role: "user", content: "What is the opposite on heart?" },
    ];
    let mut text = String::new();
    let mut pieces = 0;
    model
        .generate(&turns, 256, 0.6, &[], &mut |piece| {
            text.push_str(piece);
            pieces += 1;
            true
        })
        .unwrap();
    let words: Vec<&str> = text.split_whitespace().collect();
    let runs: Vec<String> = words.windows(5).map(|w| w.join(" ").to_lowercase()).collect();
    let looping = runs.iter().find(|run| runs.iter().filter(|other| other == run).count() >= 3);
    assert!(looping.is_none(), "the reply repeats {looping:?}: {text:?}");
    assert!(pieces < 256, "the reply ran to the token bound: {text:?}");
}
