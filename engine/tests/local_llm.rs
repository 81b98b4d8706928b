//! SmolLM2-135M-Instruct from its GGUF: streams a non-empty answer to a short question and stops, and
//! stops early when the stream is dropped.

use confab_engine::providers::llm::{ChatMessage, ChatRequest, LanguageModel, LlmEvent};
use confab_engine::providers::local_llm::LocalLlm;

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

    // Dropping the stream stops generation: the model is free again at once.
    let mut long = llm.stream(request(400));
    assert!(matches!(long.recv().await, Some(Ok(LlmEvent::Text(_)))));
    drop(long);
    let started = std::time::Instant::now();
    let mut again = llm.stream(request(8));
    while again.recv().await.is_some() {}
    assert!(started.elapsed() < std::time::Duration::from_secs(20));
}
