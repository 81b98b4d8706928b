//! The fleet as real processes on loopback: a NATS server of the test's own, a fresh PostgreSQL
//! database, replicas (`confab serve --nats`) and media workers (`confab worker`), with WebRTC
//! participants (our `Offerer`, Opus over UDP) and a webhook receiver.
//!
//! - Four calls spread over two workers of two slots; a fifth gets 503; events and transcripts stored and
//!   delivered. Then a worker is killed (-9) mid-call: its calls end (`worker_lost`, `participant_left`,
//!   `call_ended`), the other worker's calls go on, a new call lands on the survivor.
//! - A replica is killed (-9) mid-delivery: the other delivers the rest of the outbox.
//! - SIGTERM drains a worker with a call in progress.
//! - A job redelivered after a worker crashed before acknowledging it is admitted once; a job published
//!   twice (same `Nats-Msg-Id`) is taken once.
//! - A replica with `--embedded-worker` takes calls from the queue like any worker.
//! - A worker cut from PostgreSQL (a proxy the test cuts) is lost to the fleet and hangs up its own calls.
//! - A meeting bot sent through a replica without media places its call on a worker (a fake Google Meet).
//!
//! The tests take turns (one fleet at a time): each starts several processes that load the models.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use confab_calls::fleet_protocol::{self as protocol, CallJob, Rpc, RpcReply, Taken};
use confab_engine::{ConversationEvent, EventKind};
use confab_store::Db;
use confab_store::workers;
use confab_tests::caller::{Caller, client_config, offer, speech_16k, token_of};
use confab_tests::fleet::{
    CuttableProxy, Nats, Worker, create_key, database_address, drop_database, fresh_database, through_port,
};
use confab_tests::receiver::Receiver;
use confab_tests::server::{Server, api};
use confab_worker::media::peer::Offerer;
use futures_util::StreamExt;
use reqwest::Method;
use serde_json::{Value, json};
use webrtc::peer_connection::RTCPeerConnectionState;

const QUESTION: &str = "When does the library open?";
const REPLY: &str = "At nine.";
const FULL: &str = r#"{"error":"No free media session; try again later"}"#;

/// One fleet at a time in this binary.
static TURN: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// An OpenAI-compatible speech-to-text and chat server (the real wire protocol): every utterance is
/// `QUESTION`, every answer `REPLY`.
async fn providers() -> String {
    async fn chat() -> Response {
        let chunk = json!({ "choices": [{ "index": 0, "delta": { "content": REPLY }, "finish_reason": null }] });
        let body = format!("data: {chunk}\n\ndata: [DONE]\n\n");
        Response::builder().header("content-type", "text/event-stream").body(Body::from(body)).unwrap()
    }
    async fn transcribe() -> Response {
        axum::Json(json!({ "text": QUESTION })).into_response()
    }
    let app =
        Router::new().route("/v1/chat/completions", post(chat)).route("/v1/audio/transcriptions", post(transcribe));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}/v1", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    base
}

/// A fleet's shared pieces: directory, NATS, database, API key.
struct Fleet {
    dir: std::path::PathBuf,
    nats: Nats,
    database_url: String,
    db: Db,
    key: String,
    client: reqwest::Client,
}

impl Fleet {
    async fn new(name: &str) -> Fleet {
        let dir = std::env::temp_dir().join(format!("confab-fleet-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let nats = Nats::start(&dir);
        let database_url = fresh_database(&format!("confab_fleet_{name}_{}", std::process::id()));
        let key = create_key(&database_url);
        let db = Db::connect(&database_url).await.unwrap();
        Fleet { dir, nats, database_url, db, key, client: reqwest::Client::new() }
    }

    async fn replica(&self, name: &str, extra: &[&str]) -> Server {
        let mut args = vec!["--database-url", &self.database_url, "--nats", &self.nats.url, "--allow-private-urls"];
        args.extend_from_slice(extra);
        Server::start(&self.dir.join(name), &args).await
    }

    async fn worker(&self, id: &str, extra: &[&str], env: &[(&str, &str)]) -> Worker {
        Worker::start(&self.dir, id, &self.nats.url, &self.database_url, extra, env).await
    }

    /// An agent on `base` whose webhooks go to `receiver`; returns (agent id, webhook secret).
    async fn agent(&self, base: &str, receiver: &Receiver, events: &[&str], providers: bool) -> (String, String) {
        let config = if providers {
            json!({ "llm": { "provider": "custom", "model": "test-model" },
                    "stt": { "provider": "custom", "model": "whisper-1", "max_endpointing_delay": 1.0 },
                    "tts": { "provider": "local", "model_id": "espeak-ng" } })
        } else {
            json!({ "llm": { "provider": "local" }, "stt": { "provider": "local" }, "tts": { "provider": "local" } })
        };
        let body = json!({
            "agent_name": "Librarian",
            "agent_system_prompt": "You are the library's receptionist.",
            "avatars": [{ "avatar_key_id": "stock-amara", "config": config }],
            "callback_url": receiver.hook_url,
            "callback_events": events
        });
        let agent = api(&self.client, &self.key, Method::POST, format!("{base}/v1/ext/agent"), Some(body)).await;
        (agent["id"].as_str().unwrap().to_string(), agent["webhook_secret"].as_str().unwrap().to_string())
    }

    async fn conversation(&self, base: &str, agent_id: &str, user_id: &str) -> Value {
        let body = json!({ "agent_id": agent_id, "user_name": "Ada", "user_id": user_id });
        api(&self.client, &self.key, Method::POST, format!("{base}/v1/ext/conversation"), Some(body)).await
    }

    async fn record(&self, base: &str, id: &str) -> Value {
        api(&self.client, &self.key, Method::GET, format!("{base}/v1/ext/conversation/{id}"), None).await
    }

    async fn holder(&self, id: &str) -> String {
        workers::holder(&self.db, id).await.unwrap().unwrap().0
    }

    async fn wait_for_status(&self, base: &str, id: &str, expected: &str) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while self.record(base, id).await["status"] != expected {
            assert!(Instant::now() < deadline, "{id} never became {expected}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// A call in progress through a replica: its agent (webhooks `participant_left`, `call_ended`), the
/// conversation, the participant.
struct LiveCall {
    agent_id: String,
    secret: String,
    id: String,
    caller: Caller,
}

impl Fleet {
    async fn live_call(&self, base: &str, receiver: &Receiver) -> LiveCall {
        let (agent_id, secret) = self.agent(base, receiver, &["participant_left", "call_ended"], false).await;
        let conversation = self.conversation(base, &agent_id, "user-1").await;
        let id = id_of(&conversation);
        let caller = Caller::join(&self.client, base, &id, &token_of(&conversation), vec![]).await;
        self.wait_for_status(base, &id, "IN_PROGRESS").await;
        LiveCall { agent_id, secret, id, caller }
    }
}

impl Drop for Fleet {
    fn drop(&mut self) {
        // The test's processes are gone by now (declared after the fleet, dropped before it).
        drop_database(&self.database_url);
    }
}

fn id_of(conversation: &Value) -> String {
    conversation["id"].as_str().unwrap().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_spread_over_workers_and_a_lost_workers_calls_end() {
    let _turn = TURN.lock().await;
    let fleet = Fleet::new("spread").await;
    let providers = providers().await;
    let env = [("CONFAB_LLM_BASE_URL", providers.as_str()), ("CONFAB_STT_BASE_URL", providers.as_str())];
    let mut w1 = fleet.worker("w1", &["--max-calls", "2"], &env).await;
    let _w2 = fleet.worker("w2", &["--max-calls", "2"], &env).await;
    // r2 would wait a minute for a free worker: a join over the fleet's capacity must not wait at all.
    let (r1, r2) = (fleet.replica("r1", &[]).await, fleet.replica("r2", &["--dispatch-timeout", "60"]).await);
    let bases = [r1.base.clone(), r2.base.clone()];
    let receiver = Receiver::start(vec![]).await;
    let events = ["utterance_committed", "participant_left", "call_ended"];
    let (agent_id, secret) = fleet.agent(&bases[0], &receiver, &events, true).await;
    let speech = speech_16k(&fleet.dir, QUESTION);

    // Four calls, joined alternately through both replicas, fill both workers' two slots.
    let mut calls = Vec::new();
    for n in 0..4 {
        let base = &bases[n % 2];
        let conversation = fleet.conversation(base, &agent_id, &format!("user-{n}")).await;
        let id = id_of(&conversation);
        let token = token_of(&conversation);
        let caller = Caller::join(&fleet.client, base, &id, &token, speech.clone()).await;
        calls.push((id, token, caller));
    }
    let mut per_worker: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (id, _, _) in &calls {
        per_worker.entry(fleet.holder(id).await).or_default().push(id.clone());
    }
    assert_eq!(per_worker.keys().collect::<Vec<_>>(), ["w1", "w2"], "{per_worker:?}");
    assert!(per_worker.values().all(|ids| ids.len() == 2), "{per_worker:?}");

    // The replicas see the fleet: two workers, four slots, all taken (as last reported: heartbeats are 2 s apart).
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let url = format!("{}/metrics", bases[1]);
        let text = fleet.client.get(url).header("x-api-key", &fleet.key).send().await.unwrap().text().await.unwrap();
        let fleet_lines: Vec<&str> = text.lines().filter(|line| line.starts_with("confab_fleet_")).collect();
        let expected = ["confab_fleet_calls_active 4", "confab_fleet_calls_max 4", "confab_fleet_workers 2"];
        if expected.iter().all(|line| fleet_lines.contains(line)) {
            break;
        }
        assert!(Instant::now() < deadline, "{fleet_lines:?}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }

    // A fifth: no free slot anywhere; refused at once (from the database's view of the fleet), not after
    // the minute r2 would wait for a worker to take its job.
    let fifth = fleet.conversation(&bases[1], &agent_id, "user-5").await;
    let sdp = Offerer::new(&client_config()).await.unwrap().offer_sdp;
    let refused = offer(&fleet.client, &bases[1], &id_of(&fifth), &token_of(&fifth), sdp).await;
    assert_eq!(refused.status(), 503);
    assert_eq!(refused.text().await.unwrap(), FULL);
    let r2_log = std::fs::read_to_string(fleet.dir.join("r2").join("serve.log")).unwrap();
    assert!(r2_log.contains("every worker of the fleet is full"), "{r2_log}");
    assert!(!r2_log.contains("no media worker took the call in time"), "{r2_log}");

    // Every call is heard, transcribed and reported, whichever replica delivers.
    for (id, _, _) in &calls {
        receiver.wait_for_event(&secret, id, "utterance_committed", Duration::from_secs(90)).await;
        let record = fleet.record(&bases[0], id).await;
        assert_eq!(record["status"], "IN_PROGRESS");
        let transcript = record["transcript"].as_array().unwrap();
        assert!(transcript.iter().any(|entry| entry["role"] == "user" && entry["content"] == QUESTION), "{record}");
    }

    // Worker w1 dies mid-call: its calls end with the documented reason and their webhooks.
    w1.kill();
    let lost = per_worker["w1"].clone();
    for id in &lost {
        receiver.wait_for_event(&secret, id, "call_ended", Duration::from_secs(30)).await;
        // What the call heard, then its end. A live call hears in real time: when this loaded process's
        // microphone falls behind by the endpointing delay mid-question, the worker hears silence there
        // (an input underrun) and commits the question in two utterances, as it should.
        let names = receiver.event_names(&secret, id);
        let heard = names.iter().take_while(|name| *name == "utterance_committed").count();
        assert!(heard >= 1 && names[heard..] == ["participant_left", "call_ended"], "{names:?}");
        let user = calls.iter().position(|(call, _, _)| call == id).unwrap();
        assert_eq!(receiver.events(&secret, id)[heard]["event"]["payload"]["id"], format!("user-{user}"));
        let record = fleet.record(&bases[1], id).await;
        assert_eq!((record["status"].as_str(), record["end_reason"].as_str()), (Some("ENDED"), Some("worker_lost")));
    }
    // w2's calls go on.
    for id in &per_worker["w2"] {
        assert_eq!(fleet.record(&bases[0], id).await["status"], "IN_PROGRESS");
        assert!(calls.iter().find(|(call, _, _)| call == id).unwrap().2.connected());
        assert!(!receiver.event_names(&secret, id).contains(&"call_ended".to_string()));
    }
    // One of them hangs up (the replica relays it by request-reply to w2): a slot frees on w2, and a new
    // call lands there.
    let (kept, hung_up) = (&per_worker["w2"][0], &per_worker["w2"][1]);
    let (_, token, _) = calls.iter().find(|(call, _, _)| call == hung_up).unwrap();
    let response = fleet
        .client
        .delete(format!("{}/v1/session/conversation/{hung_up}/webrtc", bases[1]))
        .bearer_auth(token)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 204);
    receiver.wait_for_event(&secret, hung_up, "call_ended", Duration::from_secs(30)).await;
    fleet.wait_for_status(&bases[1], hung_up, "ENDED").await;
    let sixth = fleet.conversation(&bases[0], &agent_id, "user-6").await;
    let _new_call = Caller::join(&fleet.client, &bases[0], &id_of(&sixth), &token_of(&sixth), vec![]).await;
    assert_eq!(fleet.holder(&id_of(&sixth)).await, "w2");
    assert_eq!(fleet.record(&bases[1], kept).await["status"], "IN_PROGRESS");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_killed_mid_delivery_leaves_the_rest_to_another() {
    let _turn = TURN.lock().await;
    let fleet = Fleet::new("delivery").await;
    let mut r1 = fleet.replica("r1", &[]).await;
    let receiver = Receiver::start_answering_after(vec![], Duration::from_millis(300)).await;
    let (agent_id, secret) = fleet.agent(&r1.base, &receiver, &["user.started_speaking"], false).await;
    let mut conversations = Vec::new();
    for n in 0..6 {
        conversations.push(id_of(&fleet.conversation(&r1.base, &agent_id, &format!("user-{n}")).await));
    }
    // Five events per conversation, stored as a worker stores them; r1 starts delivering at once.
    let event = ConversationEvent { media_time: Duration::ZERO, kind: EventKind::UserStartedSpeaking };
    for _ in 0..5 {
        for id in &conversations {
            assert!(confab_store::outbox::enqueue(&fleet.db, id, &event).await.unwrap());
        }
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    while receiver.deliveries().len() < 6 {
        assert!(Instant::now() < deadline, "r1 delivered nothing");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    r1.kill();
    let delivered_by_r1 = receiver.deliveries().len();
    assert!(delivered_by_r1 < 30, "r1 delivered everything before it was killed");
    let _r2 = fleet.replica("r2", &[]).await;
    let deadline = Instant::now() + Duration::from_secs(60);
    let distinct = || receiver.deliveries().into_iter().map(|(id, _)| id).collect::<HashSet<_>>();
    while distinct().len() < 30 {
        assert!(Instant::now() < deadline, "only {} of 30 events delivered", distinct().len());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let duplicates = receiver.deliveries().len() - 30;
    eprintln!("delivered 30 events, {delivered_by_r1} before the kill, {duplicates} duplicate(s)");
    // Duplicates are at most the deliveries r1 had in flight (one per conversation).
    assert!(duplicates <= conversations.len(), "{duplicates} duplicates");
    // Within a conversation, first arrivals keep the order events were stored in.
    let mut order: HashMap<String, Vec<String>> = HashMap::new();
    for (id, body) in receiver.deliveries() {
        let conversation =
            serde_json::from_str::<Value>(&body).unwrap()["conversation_id"].as_str().unwrap().to_string();
        let seen = order.entry(conversation).or_default();
        if !seen.contains(&id) {
            seen.push(id);
        }
    }
    for id in &conversations {
        assert!(receiver.event_names(&secret, id).len() >= 5);
        let stored: Vec<String> = outbox_ids(&fleet.db, id).await;
        assert_eq!(order[id], stored, "delivery order of {id}");
    }
}

/// The outbox ids of `conversation_id` in the order they were stored.
async fn outbox_ids(db: &Db, conversation_id: &str) -> Vec<String> {
    use sqlx::Row;
    sqlx::query("SELECT id FROM webhook_outbox WHERE conversation_id = $1 ORDER BY seq")
        .bind(conversation_id)
        .fetch_all(&db.pool)
        .await
        .unwrap()
        .iter()
        .map(|row| row.get::<String, _>("id"))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_drains_a_worker() {
    let _turn = TURN.lock().await;
    let fleet = Fleet::new("drain").await;
    let mut worker = fleet.worker("drained", &["--max-calls", "2", "--drain-timeout", "8"], &[]).await;
    let replica = fleet.replica("r1", &["--dispatch-timeout", "1"]).await;
    let receiver = Receiver::start(vec![]).await;
    let LiveCall { agent_id, secret, id, caller } = fleet.live_call(&replica.base, &receiver).await;

    let terminated = Instant::now();
    let pid = worker.child.id().to_string();
    assert!(std::process::Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());
    // Draining: the worker takes no new call (it has a free slot), the call in progress goes on.
    let deadline = Instant::now() + Duration::from_secs(5);
    while !worker.log_text().contains("draining") {
        assert!(Instant::now() < deadline, "the worker did not start draining");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let second = fleet.conversation(&replica.base, &agent_id, "user-2").await;
    let sdp = Offerer::new(&client_config()).await.unwrap().offer_sdp;
    let refused = offer(&fleet.client, &replica.base, &id_of(&second), &token_of(&second), sdp).await;
    assert_eq!(refused.status(), 503);
    assert!(caller.connected());
    assert_eq!(fleet.record(&replica.base, &id).await["status"], "IN_PROGRESS");

    // At the drain timeout the call is ended cleanly and the worker leaves the fleet.
    let status = worker.child.wait().unwrap();
    assert!(status.success(), "the worker exited with {status}");
    assert!(terminated.elapsed() >= Duration::from_secs(8), "ended before the drain timeout");
    receiver.wait_for_event(&secret, &id, "call_ended", Duration::from_secs(15)).await;
    let record = fleet.record(&replica.base, &id).await;
    assert_eq!(record["status"], "ENDED");
    assert!(record.get("end_reason").is_none(), "a drained call ends cleanly: {record}");
    assert!(workers::list(&fleet.db).await.unwrap().is_empty(), "the worker is still registered");
    worker.kill();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_is_admitted_once_when_redelivered_or_published_twice() {
    let _turn = TURN.lock().await;
    let fleet = Fleet::new("once").await;
    let replica = fleet.replica("r1", &[]).await;
    let receiver = Receiver::start(vec![]).await;
    let (agent_id, secret) = fleet.agent(&replica.base, &receiver, &["call_ended"], false).await;

    // w1 admits a call, then dies before acknowledging its job (fault injection = kill -9 at that point).
    let crashing = fleet.worker("w1", &["--fault", "crash-before-job-ack"], &[]).await;
    let conversation = fleet.conversation(&replica.base, &agent_id, "user-1").await;
    let id = id_of(&conversation);
    let offerer = Offerer::new(&client_config()).await.unwrap();
    let answer = offer(&fleet.client, &replica.base, &id, &token_of(&conversation), offerer.offer_sdp.clone()).await;
    assert_eq!(answer.status(), 201);
    let mut crashing = crashing;
    let status = crashing.child.wait().unwrap();
    assert!(!status.success(), "w1 should have crashed");
    // w2 gets the redelivered job (after the ack wait) and must not admit the call again; the call is
    // ended as w1's.
    let w2 = fleet.worker("w2", &[], &[]).await;
    receiver.wait_for_event(&secret, &id, "call_ended", Duration::from_secs(30)).await;
    let deadline = Instant::now() + protocol::JOB_ACK_WAIT + Duration::from_secs(20);
    while !w2.log_text().contains("call job dropped") {
        assert!(Instant::now() < deadline, "w2 never saw the redelivered job:\n{}", w2.log_text());
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(fleet.holder(&id).await, "w1", "the call moved to another worker");
    assert_eq!(fleet.record(&replica.base, &id).await["end_reason"], "worker_lost");
    assert_eq!(receiver.event_names(&secret, &id), ["call_ended"]);

    // A job published twice with the same Nats-Msg-Id is taken once; the offer then goes by request-reply
    // to the worker that took it.
    let nats = async_nats::connect(&fleet.nats.url).await.unwrap();
    let js = async_nats::jetstream::new(nats.clone());
    let conversation = fleet.conversation(&replica.base, &agent_id, "user-2").await;
    let id = id_of(&conversation);
    let job = CallJob {
        job_id: uuid::Uuid::new_v4().to_string(),
        conversation_id: id.clone(),
        reply_to: nats.new_inbox(),
        expires_at_ms: protocol::now_ms() + 30_000,
    };
    let mut replies = nats.subscribe(job.reply_to.clone()).await.unwrap();
    for _ in 0..2 {
        let mut headers = async_nats::HeaderMap::new();
        headers.insert("Nats-Msg-Id", job.job_id.as_str());
        let payload = serde_json::to_vec(&job).unwrap();
        let ack = js
            .publish_with_headers(protocol::job_subject(protocol::DEFAULT_QUEUE), headers, payload.into())
            .await
            .unwrap();
        ack.await.unwrap();
    }
    let taken = tokio::time::timeout(Duration::from_secs(10), replies.next()).await.unwrap().unwrap();
    let taken: Taken = serde_json::from_slice(&taken.payload).unwrap();
    assert_eq!(taken.worker_id, "w2");
    assert!(tokio::time::timeout(Duration::from_secs(3), replies.next()).await.is_err(), "taken twice");
    let offerer = Offerer::new(&client_config()).await.unwrap();
    let request =
        Rpc::Offer { job_id: job.job_id.clone(), conversation_id: id.clone(), sdp: offerer.offer_sdp.clone() };
    let reply = nats.request(protocol::rpc_subject("w2"), serde_json::to_vec(&request).unwrap().into()).await.unwrap();
    let RpcReply::Answer { sdp } = serde_json::from_slice(&reply.payload).unwrap() else {
        panic!("no answer: {}", String::from_utf8_lossy(&reply.payload));
    };
    let caller = Caller::connect(offerer, sdp, vec![]).await;
    fleet.wait_for_status(&replica.base, &id, "IN_PROGRESS").await;
    assert_eq!(fleet.holder(&id).await, "w2");
    // Another job for the admitted conversation (a new id: not deduplicated by NATS) is taken by a worker,
    // which finds the conversation held and drops it: no second admission.
    let dropped = |log: String| log.matches("already admitted elsewhere").count();
    let dropped_before = dropped(w2.log_text());
    let again = CallJob { job_id: uuid::Uuid::new_v4().to_string(), ..job.clone() };
    let payload = serde_json::to_vec(&again).unwrap();
    js.publish(protocol::job_subject(protocol::DEFAULT_QUEUE), payload.into()).await.unwrap().await.unwrap();
    assert!(tokio::time::timeout(Duration::from_secs(3), replies.next()).await.is_err(), "admitted twice");
    let deadline = Instant::now() + Duration::from_secs(10);
    while dropped(w2.log_text()) == dropped_before {
        assert!(Instant::now() < deadline, "w2 never took the second job:\n{}", w2.log_text());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(caller.connected());
    // A job on another queue (`--queue`) is not for w2 (it serves `default`).
    let elsewhere = fleet.conversation(&replica.base, &agent_id, "user-3").await;
    let other_job = CallJob {
        job_id: uuid::Uuid::new_v4().to_string(),
        conversation_id: id_of(&elsewhere),
        reply_to: nats.new_inbox(),
        expires_at_ms: protocol::now_ms() + 30_000,
    };
    let payload = serde_json::to_vec(&other_job).unwrap();
    js.publish(protocol::job_subject("elsewhere"), payload.into()).await.unwrap().await.unwrap();
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(fleet.holder(&id_of(&elsewhere)).await, "", "a worker of another queue took the job");
    // Hanging up through the replica reaches the worker by request-reply.
    let hang_up = fleet
        .client
        .delete(format!("{}/v1/session/conversation/{id}/webrtc", replica.base))
        .bearer_auth(token_of(&conversation))
        .send()
        .await
        .unwrap();
    assert_eq!(hang_up.status(), 204);
    receiver.wait_for_event(&secret, &id, "call_ended", Duration::from_secs(15)).await;
    drop(caller);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_with_an_embedded_worker_takes_calls_from_the_fleet() {
    let _turn = TURN.lock().await;
    let fleet = Fleet::new("embedded").await;
    let replica = fleet.replica("r1", &["--embedded-worker", "--max-calls", "1"]).await;
    let receiver = Receiver::start(vec![]).await;
    let (agent_id, secret) = fleet.agent(&replica.base, &receiver, &["call_ended"], false).await;
    let conversation = fleet.conversation(&replica.base, &agent_id, "user-1").await;
    let id = id_of(&conversation);
    let token = token_of(&conversation);
    let _caller = Caller::join(&fleet.client, &replica.base, &id, &token, vec![]).await;
    let holder = fleet.holder(&id).await;
    assert!(holder.starts_with("embedded-"), "held by {holder}");
    // Its one slot is taken: the next call waits for the dispatch timeout, then 503.
    let second = fleet.conversation(&replica.base, &agent_id, "user-2").await;
    let sdp = Offerer::new(&client_config()).await.unwrap().offer_sdp;
    let refused = offer(&fleet.client, &replica.base, &id_of(&second), &token_of(&second), sdp).await;
    assert_eq!(refused.status(), 503);
    assert_eq!(refused.text().await.unwrap(), FULL);
    let url = format!("{}/v1/session/conversation/{id}/webrtc", replica.base);
    assert_eq!(fleet.client.delete(&url).bearer_auth(&token).send().await.unwrap().status(), 204);
    receiver.wait_for_event(&secret, &id, "call_ended", Duration::from_secs(15)).await;
    assert_eq!(fleet.client.delete(&url).bearer_auth(&token).send().await.unwrap().status(), 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_cut_from_the_database_hangs_up_its_calls() {
    let _turn = TURN.lock().await;
    let fleet = Fleet::new("fenced").await;
    // The worker reaches PostgreSQL through a proxy the test can cut; the replica directly.
    let proxy = CuttableProxy::start(database_address(&fleet.database_url)).await;
    let proxied = through_port(&fleet.database_url, proxy.port);
    let _worker = Worker::start(&fleet.dir, "cut", &fleet.nats.url, &proxied, &[], &[]).await;
    let replica = fleet.replica("r1", &[]).await;
    let receiver = Receiver::start(vec![]).await;
    let LiveCall { secret, id, caller, .. } = fleet.live_call(&replica.base, &receiver).await;

    proxy.cut();
    let cut = Instant::now();
    // The replicas end the call in the records (worker_lost) …
    receiver.wait_for_event(&secret, &id, "call_ended", Duration::from_secs(30)).await;
    assert_eq!(fleet.record(&replica.base, &id).await["end_reason"], "worker_lost");
    // … and the worker, unable to heartbeat, hangs up: the participant's connection closes.
    let mut state = caller.offerer.state.clone();
    tokio::time::timeout(Duration::from_secs(30), async {
        while *state.borrow_and_update() == RTCPeerConnectionState::Connected {
            state.changed().await.unwrap();
        }
    })
    .await
    .expect("the worker hung up within 30 s of the cut");
    assert!(cut.elapsed() >= Duration::from_secs(8), "hung up {:?} after the cut, before the timeout", cut.elapsed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_meeting_bot_on_a_replica_places_its_call_on_a_worker() {
    use confab_tests::fake_meeting::{Admission, FakeMeeting};
    let _turn = TURN.lock().await;
    let fleet = Fleet::new("meeting").await;
    let fake = FakeMeeting::start("google_meet", Admission::Admit, vec![]).await;
    let rule = format!("--meeting-browser-arg={}", fake.resolver_rule());
    let browser =
        ["--meeting-browser", confab_tests::browser::CHROMIUM, "--meeting-browser-arg=--ignore-certificate-errors"];
    let mut args = vec!["--no-media", rule.as_str()];
    args.extend_from_slice(&browser);
    let replica = fleet.replica("r1", &args).await;
    let _worker = fleet.worker("w1", &[], &[]).await;
    let receiver = Receiver::start(vec![]).await;
    let (agent_id, secret) = fleet.agent(&replica.base, &receiver, &["call_ended"], false).await;
    let body = json!({ "agent_id": agent_id, "meeting_url": "https://meet.google.com/abc-defg-hij",
        "user_name": "Confab Notes", "user_id": "standup" });
    let response = fleet
        .client
        .post(format!("{}/v1/ext/externalmeeting", replica.base))
        .header("x-api-key", &fleet.key)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let id = response.headers()["x-conversation-id"].to_str().unwrap().to_string();
    // The meeting's silence reaches the agent through the worker.
    let deadline = Instant::now() + Duration::from_secs(90);
    while fleet.record(&replica.base, &id).await["status"] != "IN_PROGRESS" {
        assert!(Instant::now() < deadline, "the bot's call never carried media");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(fleet.holder(&id).await, "w1");
    assert_eq!(fake.bot_name().as_deref(), Some("Confab Notes"));
    fake.end();
    receiver.wait_for_event(&secret, &id, "call_ended", Duration::from_secs(30)).await;
    let record = fleet.record(&replica.base, &id).await;
    assert_eq!((record["status"].as_str(), record["end_reason"].as_str()), (Some("ENDED"), Some("meeting_ended")));
    // A replica killed (-9) takes its bots' browsers with it.
    let fake = FakeMeeting::start("google_meet", Admission::Hold, vec![]).await;
    let rule = format!("--meeting-browser-arg={}", fake.resolver_rule());
    let mut args = vec!["--no-media", rule.as_str()];
    args.extend_from_slice(&browser);
    let mut doomed = fleet.replica("r2", &args).await;
    let body = json!({ "agent_id": agent_id, "meeting_url": "https://meet.google.com/abc-defg-hij",
        "user_name": "Confab Notes", "user_id": "standup" });
    let url = format!("{}/v1/ext/externalmeeting", doomed.base);
    let response = fleet.client.post(url).header("x-api-key", &fleet.key).json(&body).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let deadline = Instant::now() + Duration::from_secs(60);
    while fake.bot_state() != "lobby" {
        assert!(Instant::now() < deadline, "the bot never reached the lobby");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let marker = confab_meetings::browser::MARKER_VARIABLE;
    assert!(!confab_meetings::browser::processes_with_variable(marker).is_empty());
    doomed.kill();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let left = confab_meetings::browser::processes_with_variable(marker);
        if left.is_empty() {
            break;
        }
        assert!(Instant::now() < deadline, "browser processes outlived their server: {left:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
