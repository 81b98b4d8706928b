//! A call cut by a crash is ended at restart: the real `confab serve` (SQLite) holds a live call from our
//! WebRTC `Offerer`, is killed with SIGKILL, and started again on the same data. The conversation reads
//! ENDED with `end_reason: "server_restart"`, `participant_left` and `call_ended` (payload
//! `{"reason": "server_restart"}`) are delivered, and what was recorded is kept and served. A conversation
//! nobody had joined stays open.

use std::time::{Duration, Instant};

use confab_tests::caller::{Caller, token_of};
use confab_tests::ffprobe_streams;
use confab_tests::receiver::Receiver;
use confab_tests::server::{Server, api, create_key};
use reqwest::Method;
use serde_json::{Value, json};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_cut_by_a_crash_is_ended_at_restart() {
    let dir = std::env::temp_dir().join(format!("confab-crash-restart-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let data = dir.join("data");
    std::fs::create_dir_all(&data).unwrap();
    let key = create_key(&data);
    let receiver = Receiver::start(vec![]).await;
    let mut server = Server::start(&data, &["--allow-private-urls"]).await;
    let (client, base) = (reqwest::Client::new(), server.base.clone());
    let agent = json!({
        "agent_name": "Listener",
        "agent_system_prompt": "Listen.",
        "record": true,
        "avatars": [{ "avatar_key_id": "stock-amara", "config": {
            "llm": { "provider": "local" }, "stt": { "provider": "local" }, "tts": { "provider": "local" } } }],
        "callback_url": receiver.hook_url,
        "callback_events": ["participant_left", "call_ended"]
    });
    let agent = api(&client, &key, Method::POST, format!("{base}/v1/ext/agent"), Some(agent)).await;
    let secret = agent["webhook_secret"].as_str().unwrap().to_string();
    let create = |user_id: &str| {
        let body = json!({ "agent_id": agent["id"], "user_name": "Ada", "user_id": user_id });
        api(&client, &key, Method::POST, format!("{base}/v1/ext/conversation"), Some(body))
    };
    let conversation = create("ada").await;
    let untouched = create("bob").await;
    let id = conversation["id"].as_str().unwrap().to_string();
    let record = |id: String| api(&client, &key, Method::GET, format!("{base}/v1/ext/conversation/{id}"), None);
    let caller = Caller::join(&client, &base, &id, &token_of(&conversation), vec![]).await;
    let deadline = Instant::now() + Duration::from_secs(15);
    while record(id.clone()).await["status"] != "IN_PROGRESS" {
        assert!(Instant::now() < deadline, "the call never became IN_PROGRESS");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await; // a little recorded

    server.kill();
    drop(caller);
    let _server = Server::start_on(&data, server.port, &["--allow-private-urls"]).await;
    receiver.wait_for_event(&secret, &id, "call_ended", Duration::from_secs(15)).await;
    let events = receiver.events(&secret, &id);
    let names: Vec<&str> = events.iter().map(|e| e["event"]["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["participant_left", "call_ended"]);
    assert_eq!(events[0]["event"]["payload"]["id"], "ada");
    assert_eq!(events[1]["event"]["payload"], json!({ "reason": "server_restart" }));
    let ended = record(id.clone()).await;
    assert_eq!((ended["status"].as_str(), ended["end_reason"].as_str()), (Some("ENDED"), Some("server_restart")));
    assert_eq!(ended["is_recorded"], true, "{ended}");
    let recording =
        client.get(ended["recording_url"].as_str().unwrap()).header("x-api-key", &key).send().await.unwrap();
    assert_eq!(recording.status(), 200);
    // Cut without cues or duration, it still plays: ffprobe reads both tracks' packets.
    let file = dir.join("cut.webm");
    std::fs::write(&file, recording.bytes().await.unwrap()).unwrap();
    let streams = ffprobe_streams(&file);
    for codec in ["vp8", "opus"] {
        let stream = streams.iter().find(|s| s["codec_name"] == codec).unwrap_or_else(|| panic!("{streams:?}"));
        let packets: u64 = stream["nb_read_packets"].as_str().unwrap().parse().unwrap();
        assert!(packets > 10, "{codec}: {packets} packets");
    }
    let open: Value = record(untouched["id"].as_str().unwrap().to_string()).await;
    assert_eq!(open["status"], "STARTED", "nobody had joined it");
}
