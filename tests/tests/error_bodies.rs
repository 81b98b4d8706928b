//! What an API key can learn from error bodies: the real `confab serve`, started as operators often run it
//! (`RUST_BACKTRACE=1`) with one directory allowed for models (`--allow-model-dir`), walked through the
//! error paths that wrap a library's error — a language model named by `llm.model` (candle's GGUF
//! parser), a picture that does not decode (the image decoders), a database that fails under a request
//! (sqlx) — and a malformed body and SDP offer. No body carries a backtrace, a source or server path, or a
//! library's debug output; a file outside the models directory and the allowed one is refused in the same
//! words whether it exists or not; the server log keeps the detail, on one line with the request's id
//! (`x-request-id`).

use std::path::Path;
use std::time::Duration;

use confab_tests::scratch;
use confab_tests::server::{Server, create_key};
use serde_json::{Value, json};

/// A response's status, `x-request-id` and body.
struct Answer {
    status: u16,
    request_id: String,
    body: String,
}

async fn send(request: reqwest::RequestBuilder) -> Answer {
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let request_id = response.headers().get("x-request-id").and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
    let body = response.text().await.unwrap();
    assert!(!request_id.is_empty(), "every response carries its request id: {body}");
    Answer { status, request_id, body }
}

/// `body` shows no backtrace, no source location, no debug output and none of `hidden`.
fn assert_clean(what: &str, body: &str, hidden: &[&Path]) {
    for marker in ["backtrace", ".rs:", "panicked", "src/", "RUST_BACKTRACE", "Os {", "kind:", "\\n"] {
        assert!(!body.contains(marker), "{what}: the body shows {marker:?}: {body}");
    }
    let frame = body.lines().find(|line| {
        let line = line.trim_start();
        line.split_once(": ")
            .is_some_and(|(number, _)| !number.is_empty() && number.bytes().all(|b| b.is_ascii_digit()))
    });
    assert!(frame.is_none(), "{what}: the body holds a backtrace frame: {body}");
    for path in hidden {
        let path = path.display().to_string();
        assert!(!body.contains(&path), "{what}: the body names the server's {path}: {body}");
    }
}

fn agent_naming(model: &str) -> Value {
    json!({ "agent_name": "Probe", "agent_system_prompt": "Be brief.",
        "avatars": [{ "avatar_key_id": "stock-amara", "config": { "llm": { "provider": "local", "model": model } } }] })
}

/// The reason of a refused `llm.model`, after `<name> cannot be used: `.
fn reason(body: &str) -> String {
    let error: Value = serde_json::from_str(body).unwrap();
    let error = error["error"].as_str().unwrap();
    error.split_once(" cannot be used: ").map(|(_, why)| why.to_string()).unwrap_or_else(|| panic!("{error}"))
}

/// The line of `log` that carries `request_id`, once it has been written.
async fn log_line(log: &Path, request_id: &str, saying: &str) -> String {
    for _ in 0..100 {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        if let Some(line) = text.lines().find(|line| line.contains(request_id) && line.contains(saying)) {
            return line.to_string();
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("no line with {request_id} saying {saying:?} in {}", log.display());
}

/// A PNG whose header names a 256×256 picture and whose chunks do not decode.
fn undecodable_png() -> Vec<u8> {
    let mut png = b"\x89PNG\r\n\x1a\n\x00\x00\x00\x0dIHDR".to_vec();
    png.extend_from_slice(&256u32.to_be_bytes());
    png.extend_from_slice(&256u32.to_be_bytes());
    png.extend_from_slice(&[8, 2, 0, 0, 0]);
    png.extend_from_slice(&[0xde, 0xad, 0xbe, 0xef]); // not the chunk's CRC
    png.extend_from_slice(&[0x55; 512]);
    png
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn error_bodies_show_no_files_backtraces_or_library_output() {
    let root = scratch("error-bodies");
    let (data, allowed, elsewhere) = (root.join("data"), root.join("allowed"), root.join("elsewhere"));
    std::fs::create_dir_all(&allowed).unwrap();
    std::fs::create_dir_all(&elsewhere).unwrap();
    let models = confab_models::default_models_dir();
    // A runnable GGUF in the allowed directory (a link to the fetched SmolLM2's file), a file that is not one,
    // a model outside every allowed place, and a link from the allowed directory out to it.
    let smollm2 = models.join(confab_models::paths::SMOLLM2_Q8);
    let own = allowed.join("own.gguf");
    if std::fs::hard_link(&smollm2, &own).is_err() {
        std::fs::copy(&smollm2, &own).unwrap();
    }
    let not_gguf = allowed.join("notes.gguf");
    std::fs::write(&not_gguf, "root:x:0:0:root:/root:/bin/bash\n").unwrap();
    let outside = elsewhere.join("real.gguf");
    std::fs::write(&outside, "root:x:0:0:root:/root:/bin/bash\n").unwrap();
    std::os::unix::fs::symlink(&outside, allowed.join("leaving.gguf")).unwrap();

    let key = create_key(&data);
    let allow = allowed.display().to_string();
    let backtraces = [("RUST_BACKTRACE", Path::new("1")), ("RUST_LIB_BACKTRACE", Path::new("1"))];
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let server =
        Server::start_with_env(&data, port, &["--no-media", "--no-preload", "--allow-model-dir", &allow], &backtraces)
            .await;
    let log = data.join("serve.log");
    let hidden = [models.as_path(), data.as_path(), elsewhere.as_path()];
    let client = reqwest::Client::new();
    let post = |path: &str| client.post(format!("{}{path}", server.base)).header("x-api-key", &key);
    let get = |path: &str| client.get(format!("{}{path}", server.base)).header("x-api-key", &key);

    // Models: files outside the allowed places get one reason, whether they exist or not.
    let mut reasons = Vec::new();
    let climbing = format!("{allow}/../elsewhere/real.gguf");
    let leaving = allowed.join("leaving.gguf").display().to_string();
    let outside_text = outside.display().to_string();
    for name in ["/etc/passwd", "/nonexistent/model.gguf", &outside_text, &climbing, "../../../etc/passwd", &leaving] {
        let answer = send(post("/v1/ext/agent").json(&agent_naming(name))).await;
        assert_eq!(answer.status, 400, "{name}: {}", answer.body);
        // The name the client gave is echoed back; nothing else of the server's.
        assert_clean(name, &answer.body.replace(name, "<name>"), &hidden);
        reasons.push(reason(&answer.body));
    }
    assert!(reasons.windows(2).all(|pair| pair[0] == pair[1]), "one reason for every refused place: {reasons:#?}");
    assert!(reasons[0].starts_with("no such model: name one of qwen2.5-coder-0.5b-instruct"), "{}", reasons[0]);

    // A file in the allowed directory that is no model: its reason, without the parser's words, which the log
    // keeps on one line beside the request's id.
    let named = not_gguf.display().to_string();
    let answer = send(post("/v1/ext/agent").json(&agent_naming(&named))).await;
    assert_eq!(answer.status, 400, "{}", answer.body);
    let error: Value = serde_json::from_str(&answer.body).unwrap();
    assert_eq!(
        error,
        json!({ "error": format!("Invalid request body: avatars[0].config.llm.model: {named} cannot be used: not a GGUF file") })
    );
    assert_clean("not a GGUF file", &answer.body, &hidden);
    let line = log_line(&log, &answer.request_id, "not a GGUF file").await;
    assert!(line.contains("invalid magic"), "the log keeps the parser's reason: {line}");

    // A runnable GGUF in the allowed directory, by its path and by its name, is accepted and stored as named.
    for name in [own.display().to_string(), "own".to_string()] {
        let answer = send(post("/v1/ext/agent").json(&agent_naming(&name))).await;
        assert_eq!(answer.status, 200, "{name}: {}", answer.body);
    }

    // A body that is not JSON, and an offer that is not SDP.
    let answer = send(post("/v1/ext/agent").header("content-type", "application/json").body("{\"agent_name\": ")).await;
    assert_eq!(answer.status, 400, "{}", answer.body);
    assert_clean("malformed JSON", &answer.body, &hidden);

    // Picture decoding: the job fails with the decoder's reason, and nothing of the server's.
    let png = base64_encode(&undecodable_png());
    let answer =
        send(post("/v2/custom-avatar").json(&json!({ "name": "Broken", "gender": "female", "image": png }))).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    let id = serde_json::from_str::<Value>(&answer.body).unwrap()["id"].as_str().unwrap().to_string();
    let mut failed = None;
    for _ in 0..600 {
        let answer = send(get(&format!("/v2/custom-avatar/{id}"))).await;
        let avatar: Value = serde_json::from_str(&answer.body).unwrap();
        // The picture itself (base64) is echoed back; the error is what must be clean.
        assert_clean("custom avatar", &avatar["error"].to_string(), &hidden);
        if avatar["status"] == "FAILED" {
            failed = Some(avatar);
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let failed = failed.expect("the undecodable picture's job fails");
    assert!(!failed["error"].as_str().unwrap_or_default().is_empty(), "{failed}");

    // The database: a table gone from under the server. The body is the endpoint's own words; the cause is
    // in the log, on one line with the request id.
    let url = format!("sqlite://{}", data.join("confab.db").display());
    sqlx::any::install_default_drivers();
    let pool = sqlx::AnyPool::connect(&url).await.unwrap();
    sqlx::query("ALTER TABLE knowledge_bases RENAME TO knowledge_bases_gone").execute(&pool).await.unwrap();
    let answer = send(get(&format!("/v1/ext/kb/{}", uuid::Uuid::new_v4()))).await;
    assert_eq!(answer.status, 500, "{}", answer.body);
    assert_eq!(
        serde_json::from_str::<Value>(&answer.body).unwrap(),
        json!({ "error": "Failed to retrieve knowledge base" })
    );
    let line = log_line(&log, &answer.request_id, "no such table").await;
    assert!(line.contains("Failed to retrieve knowledge base"), "{line}");
    sqlx::query("ALTER TABLE knowledge_bases_gone RENAME TO knowledge_bases").execute(&pool).await.unwrap();
    pool.close().await;

    drop(server);
    let _ = std::fs::remove_dir_all(&root);
}

fn base64_encode(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}
