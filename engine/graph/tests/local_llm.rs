//! The embedded language models from their GGUF files: the default (Qwen2.5-Coder-0.5B-Instruct) streams a
//! right answer to a short question and stops, stops early when the stream is dropped, never starts a
//! request dropped while it waited, and answers short
//! factual questions right; both models reuse kept prompt states without changing the answer; SmolLM2 does
//! not loop.

use confab_engine::providers::llm::{ChatMessage, ChatRequest, LanguageModel, LlmEvent, ToolSpec};
use confab_engine::providers::local_llm::{self, LocalLlm};
use confab_models::chat_lm::gguf;
use confab_models::chat_lm::{ChatLm, LocalChatModel, Message};
use confab_models::paths;

/// A fetched GGUF by its path, as a user names a file of their own.
fn own_gguf(stored_as: &str) -> String {
    confab_models::default_models_dir().join(stored_as).display().to_string()
}

/// The text of a whole reply.
async fn answer(llm: &LocalLlm, request: ChatRequest) -> String {
    let mut stream = llm.stream(request);
    let mut text = String::new();
    while let Some(event) = stream.recv().await {
        if let LlmEvent::Text(piece) = event.expect("no error") {
            text.push_str(&piece);
        }
    }
    text
}

/// A GGUF named by its path, of each architecture the project fetches (qwen2: Qwen2.5-Coder; llama:
/// SmolLM2), is accepted by the creation-time check, loads with its own chat template and answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gguf_named_by_path_loads_and_answers_in_each_architecture() {
    let dir = confab_models::default_models_dir();
    for (stored_as, architecture) in [(paths::QWEN_CODER_Q8, "qwen2"), (paths::SMOLLM2_Q8, "llama")] {
        let path = own_gguf(stored_as);
        assert_eq!(gguf::inspect(std::path::Path::new(&path)).expect("runnable").architecture, architecture);
        local_llm::check(&dir, &path).expect("accepted when an agent names it");
        let llm = LocalLlm::load(&dir, &path).expect("loads");
        assert_eq!(llm.name(), std::path::Path::new(stored_as).file_name().unwrap().to_str().unwrap());
        let text = answer(&llm, request(64)).await;
        assert!(text.contains("Paris"), "{stored_as}: {text:?}");
    }
}

fn request(max_tokens: u32) -> ChatRequest {
    ChatRequest {
        model: "qwen2.5-coder-0.5b-instruct".into(),
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
    let llm = LocalLlm::load(&confab_models::default_models_dir(), "").expect("models are fetched");
    assert_eq!(llm.name(), "qwen2.5-coder-0.5b-instruct", "the default");
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

/// A request whose stream is dropped while it waits for the model never starts: the next one is answered
/// right after the running one stops.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_dropped_while_it_waits_never_starts() {
    let llm = LocalLlm::load(&confab_models::default_models_dir(), "").expect("models are fetched");
    let abandoned = || local_llm::queue_counters().abandoned.load(std::sync::atomic::Ordering::SeqCst);
    let before = abandoned();
    // A long answer, not read: the model holds it (its stream full) until it is dropped.
    let counting = ChatRequest {
        messages: vec![ChatMessage::new("user", "Count from one to two hundred in words, separated by commas.")],
        ..request(400)
    };
    let mut running = llm.stream(counting);
    assert!(matches!(running.recv().await, Some(Ok(LlmEvent::Text(_)))), "the first request runs");
    let waiting = llm.stream(request(64));
    drop(waiting);
    drop(running);
    let mut next = llm.stream(request(64));
    let mut text = String::new();
    while let Some(event) = next.recv().await {
        if let LlmEvent::Text(piece) = event.unwrap() {
            text.push_str(&piece);
        }
    }
    assert!(text.contains("Paris"), "{text:?}");
    assert!(abandoned() > before, "the dropped request was abandoned unstarted");
}

#[test]
fn generation_stops_at_the_first_piece_nobody_takes() {
    // A dropped stream's sender refuses the next piece: `generate` must return there, not run to its limit.
    let mut model = ChatLm::load(&confab_models::default_models_dir(), LocalChatModel::DEFAULT).expect("models");
    let turns = [Message::new("user", "Count from one to one hundred.")];
    let mut pieces = 0;
    model
        .generate(&turns, &[], 400, 0.0, &[], &mut |_| {
            pieces += 1;
            pieces < 3
        })
        .unwrap();
    assert_eq!(pieces, 3, "no piece is decoded after the receiver refused one");
}

#[test]
fn the_model_takes_the_cores_left() {
    // The binding offers no setter for a context's threads: its context's pointer is read from its `Debug`
    // print, confirmed by llama.cpp. A new binding that prints otherwise leaves every call on every core.
    let mut model = ChatLm::load(&confab_models::default_models_dir(), LocalChatModel::DEFAULT).expect("models");
    assert!(
        model.threads_settable(),
        "llama-cpp-2 no longer prints its context's pointer (chat_lm::llama::context_pointer)"
    );
    let answer = reply(&mut model, &[("user", "What is the capital of France?")]);
    assert!(answer.contains("Paris"), "{answer:?}");
    let cores = std::thread::available_parallelism().unwrap().get();
    let used = confab_models::chat_lm::threads_in_use();
    assert!((1..=cores).contains(&used), "{used} threads of {cores} cores");
}

fn reply(model: &mut ChatLm, turns: &[(&str, &str)]) -> String {
    let turns: Vec<Message> = turns.iter().map(|(role, content)| Message::new(role, content)).collect();
    let mut text = String::new();
    model
        .generate(&turns, &[], 64, 0.0, &[], &mut |piece| {
            text.push_str(piece);
            true
        })
        .unwrap();
    text
}

/// A conversation's next turn evaluates only the new message (the kept state covers the previous prompt and
/// reply), and answers exactly as a cold run of the whole prompt does.
#[test]
fn kept_prompt_state_gives_the_cold_answer_qwen() {
    kept_prompt_state_gives_the_cold_answer(LocalChatModel::QwenCoder05b);
}

#[test]
fn kept_prompt_state_gives_the_cold_answer_smollm2() {
    kept_prompt_state_gives_the_cold_answer(LocalChatModel::SmolLm2);
}

fn kept_prompt_state_gives_the_cold_answer(which: LocalChatModel) {
    const SYSTEM: &str = "You are a helpful assistant. Answer in one short sentence.";
    let mut model = ChatLm::load(&confab_models::default_models_dir(), which).expect("models are fetched");
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
    // "And of Italy?<|im_end|>\n<|im_start|>assistant\n": the reply's end and the opening of the next
    // user message were evaluated when the reply ended.
    assert!(warm_evaluated <= 10, "evaluated {warm_evaluated} of the second prompt");

    model.forget_prefixes();
    let cold = reply(&mut model, &second);
    assert!(model.last_evaluated() > first_prompt + warm_evaluated, "the cold run evaluates the whole prompt");
    assert_eq!(warm, cold, "the kept state changes nothing");

    // Another call with the same system prompt starts from the system prompt's state.
    let other = [("system", SYSTEM), ("user", "How many days are in a week?")];
    let answer = reply(&mut model, &other);
    assert!(model.last_evaluated() < first_prompt, "{} of {first_prompt}", model.last_evaluated());

    // What the next prompt begins with, evaluated ahead (`warm`: the system prompt and the opening of the
    // user's message, at a call's start), is a kept state like the others: the prompt evaluates the user's
    // words and the template's closing only.
    model.forget_prefixes();
    model.warm(&[Message::new("system", SYSTEM)], &[]).unwrap();
    assert_eq!(reply(&mut model, &other), answer);
    // "How many days are in a week?<|im_end|>\n<|im_start|>assistant\n": 13 tokens in Qwen's vocabulary,
    // 14 in SmolLM2's.
    assert!(model.last_evaluated() <= 14, "{} of {first_prompt}", model.last_evaluated());
    // A reply that ends evaluates the opening of the user's next message before it returns.
    let next = [("system", SYSTEM), ("user", other[1].1), ("assistant", answer.as_str()), ("user", "And in a year?")];
    let warm_next = reply(&mut model, &next);
    // "And in a year?<|im_end|>\n<|im_start|>assistant\n": 10 tokens in Qwen's vocabulary, 11 in SmolLM2's.
    assert!(model.last_evaluated() <= 11, "evaluated {} of the next prompt", model.last_evaluated());
    model.forget_prefixes();
    assert_eq!(reply(&mut model, &next), warm_next, "the state evaluated ahead changes nothing");

    // A reply the user heard only the first word of: the prompt starts from the kept state it shares the
    // longest beginning with (the question and that word), not from the system prompt's.
    reply(&mut model, &other);
    let first_word = answer.split_whitespace().next().expect("an answer");
    let cut = [("system", SYSTEM), ("user", other[1].1), ("assistant", first_word), ("user", "And in a year?")];
    let after_cut = reply(&mut model, &cut);
    let cut_evaluated = model.last_evaluated();
    model.forget_prefixes();
    assert_eq!(reply(&mut model, &cut), after_cut, "the shared beginning changes nothing");
    // The word's end, "<|im_end|>\n<|im_start|>user\nAnd in a year?<|im_end|>\n<|im_start|>assistant\n".
    assert!(cut_evaluated <= 18, "evaluated {cut_evaluated} of {} after a cut reply", model.last_evaluated());
}

/// A reply does not loop: the misheard question that once made the model repeat "the opposite of the
/// opposite of heart" until the token bound (at the responder's temperature) now gets a reply that ends,
/// with no five-word run said three times.
#[test]
fn a_reply_does_not_talk_itself_into_a_loop() {
    let mut model = ChatLm::load(&confab_models::default_models_dir(), LocalChatModel::SmolLm2).expect("models");
    let turns = [
        Message::new("system", "You are a helpful assistant. Answer in one short sentence."),
        Message::new("user", "What is the opposite on heart?"),
    ];
    let mut text = String::new();
    let mut pieces = 0;
    model
        .generate(&turns, &[], 256, 0.6, &[], &mut |piece| {
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

/// The default model answers short factual questions right (greedy, the responder's system prompt style);
/// judged by whole words. (It is not always right: greedy, it gives a spider four legs; the benchmark
/// `voice_to_voice` reports its rate over 20 spoken questions.)
#[test]
fn the_default_model_answers_short_factual_questions() {
    let mut model = ChatLm::load(&confab_models::default_models_dir(), LocalChatModel::DEFAULT).expect("models");
    let system = "You are a helpful voice assistant. Answer in one short sentence.";
    let questions: [(&str, &[&str]); 4] = [
        ("What is the capital of France?", &["paris"]),
        ("How many days are in a week?", &["seven", "7"]),
        ("What color is a clear sky?", &["blue"]),
        ("What is the capital of Japan?", &["tokyo"]),
    ];
    for (question, right) in questions {
        let answer = reply(&mut model, &[("system", system), ("user", question)]);
        let words: Vec<String> = answer
            .to_lowercase()
            .split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty())
            .map(str::to_string)
            .collect();
        assert!(right.iter().any(|w| words.iter().any(|word| word == w)), "{question} → {answer:?}");
    }
}

/// Qwen calls a tool in its template's format, and answers with the tool's result.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_default_model_calls_a_tool_and_answers_with_its_result() {
    // Named by its path: the tool format comes from the file's own chat template.
    let llm = LocalLlm::load(&confab_models::default_models_dir(), &own_gguf(paths::QWEN_CODER_Q8)).expect("loads");
    let weather = ToolSpec {
        name: "get_weather".into(),
        description: "Get the current weather in a city".into(),
        parameters: serde_json::json!({
            "type": "object",
            "properties": { "city": { "type": "string", "description": "The city" } },
            "required": ["city"],
        }),
    };
    let mut request = ChatRequest {
        tools: vec![weather],
        max_tokens: 128,
        messages: vec![
            ChatMessage::new("system", "You are a helpful assistant. Answer in one short sentence."),
            ChatMessage::new("user", "What is the weather like in Paris right now?"),
        ],
        ..request(128)
    };
    let collect = |request: ChatRequest| {
        let llm = llm.clone();
        async move {
            let (mut text, mut calls, mut finish) = (String::new(), Vec::new(), String::new());
            let mut stream = llm.stream(request);
            while let Some(event) = stream.recv().await {
                match event.unwrap() {
                    LlmEvent::Text(piece) => text.push_str(&piece),
                    LlmEvent::ToolCall(call) => calls.push(call),
                    LlmEvent::Done { finish_reason, .. } => finish = finish_reason,
                }
            }
            (text, calls, finish)
        }
    };
    let (text, calls, finish) = collect(request.clone()).await;
    assert_eq!(text, "", "a call is not spoken");
    assert_eq!(calls.len(), 1, "{calls:?}");
    assert_eq!(calls[0].name, "get_weather");
    let arguments: serde_json::Value = serde_json::from_str(&calls[0].arguments).unwrap();
    assert_eq!(arguments["city"], "Paris", "{arguments}");
    assert_eq!(finish, "tool_calls");

    let id = calls[0].id.clone();
    request.messages.push(ChatMessage::tool_calls(calls));
    request.messages.push(ChatMessage::tool_result(&id, &serde_json::json!({ "sky": "sunny", "celsius": 21 })));
    let (answer, calls, finish) = collect(request).await;
    assert!(calls.is_empty(), "{calls:?}");
    assert_eq!(finish, "stop");
    let answer = answer.to_lowercase();
    assert!(answer.contains("sunny") || answer.contains("21"), "{answer:?}");
}
