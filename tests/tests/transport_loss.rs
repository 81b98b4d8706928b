//! Transport loss ends a call: a WebRTC client (our browser-like `Offerer`, over loopback UDP) joins a
//! conversation through the real `confab serve`, sends Opus, then (1) falls silent with its connection
//! still up, or (2) closes its peer connection. Either way the server reports `participant_left` with
//! the participant's id, then `call_ended`, and the record is ENDED. Signalling errors are checked too:
//! a second offer while a call runs (409) and an API key instead of the session token (401).

use std::time::Duration;

use confab_tests::caller::{Caller, client_config, offer, token_of};
use confab_tests::receiver::Receiver;
use confab_tests::server::{Server, api, create_key, wait_for_status};
use confab_worker::media::peer::Offerer;
use reqwest::Method;
use serde_json::{Value, json};

const EVENTS: [&str; 2] = ["participant_left", "call_ended"];
const NO_MEDIA_TIMEOUT_S: &str = "2";

async fn status(client: &reqwest::Client, base: &str, key: &str, id: &str) -> Value {
    api(client, key, Method::GET, format!("{base}/v1/ext/conversation/{id}"), None).await["status"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_or_vanished_participant_ends_the_call() {
    let dir = std::env::temp_dir().join(format!("confab-transport-loss-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let data = dir.join("data");
    std::fs::create_dir_all(&data).unwrap();
    let key = create_key(&data);
    let receiver = Receiver::start(vec![]).await;
    let mut server =
        Server::start(&data, &["--allow-private-webhooks", "--no-media-timeout", NO_MEDIA_TIMEOUT_S]).await;
    let (client, base) = (reqwest::Client::new(), server.base.clone());
    let agent = json!({
        "agent_name": "Listener",
        "agent_system_prompt": "Listen.",
        "avatars": [{ "avatar_key_id": "stock-amara", "config": {
            "llm": { "provider": "local" }, "stt": { "provider": "local" }, "tts": { "provider": "local" } } }],
        "callback_url": receiver.hook_url,
        "callback_events": EVENTS
    });
    let agent = api(&client, &key, Method::POST, format!("{base}/v1/ext/agent"), Some(agent)).await;
    let secret = agent["webhook_secret"].as_str().unwrap().to_string();
    let conversation = |user_id: &str| {
        let body = json!({ "agent_id": agent["id"], "user_name": "Ada", "user_id": user_id });
        api(&client, &key, Method::POST, format!("{base}/v1/ext/conversation"), Some(body))
    };

    // 1. Silence with the connection up: after the no-media timeout, the participant has left.
    let first = conversation("silent-1").await;
    let id = first["id"].as_str().unwrap().to_string();
    let token = token_of(&first);
    let unauthorized = offer(&client, &base, &id, &key, "v=0".into()).await;
    assert_eq!(unauthorized.status(), 401, "signalling takes the session token, never the API key");
    let joined = Caller::join(&client, &base, &id, &token, vec![]).await;
    wait_for_status(&client, &key, &base, &id, "IN_PROGRESS", Duration::from_secs(10)).await;
    let busy = offer(&client, &base, &id, &token, Offerer::new(&client_config()).await.unwrap().offer_sdp).await;
    assert_eq!(busy.status(), 409);
    // When silence counts as leaving is decided on exact times by `worker::media::presence` (unit tests);
    // here: the silent participant is seen as gone, and the call ends with the right events.
    joined.microphone.abort();
    receiver.wait_for_event(&secret, &id, "call_ended", Duration::from_secs(15)).await;
    assert_eq!(receiver.event_names(&secret, &id), ["participant_left", "call_ended"]);
    let left = &receiver.events(&secret, &id)[0];
    assert_eq!(left["event"]["payload"]["id"], "silent-1");
    assert_eq!(status(&client, &base, &key, &id).await, "ENDED");
    assert_eq!(joined.offerer.connection.close().await.ok(), Some(()));

    // 2. The client closes its peer connection: the server sees it close and ends the call.
    let second = conversation("gone-2").await;
    let id = second["id"].as_str().unwrap().to_string();
    let token = token_of(&second);
    let joined = Caller::join(&client, &base, &id, &token, vec![]).await;
    wait_for_status(&client, &key, &base, &id, "IN_PROGRESS", Duration::from_secs(10)).await;
    joined.offerer.connection.close().await.unwrap();
    receiver.wait_for_event(&secret, &id, "call_ended", Duration::from_secs(15)).await;
    let names = receiver.event_names(&secret, &id);
    assert_eq!(names, ["participant_left", "call_ended"]);
    assert_eq!(receiver.events(&secret, &id)[0]["event"]["payload"]["id"], "gone-2");
    assert_eq!(status(&client, &base, &key, &id).await, "ENDED");
    joined.microphone.abort();

    // An ended conversation takes no new call.
    let again = offer(&client, &base, &id, &token, Offerer::new(&client_config()).await.unwrap().offer_sdp).await;
    assert_eq!(again.status(), 409);

    assert!(server.terminate().success());
    let _ = std::fs::remove_dir_all(&dir);
}
