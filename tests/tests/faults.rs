//! Faults, failing fast and saying why (docs/api.md, "Faults"): a PostgreSQL outage under writes is answered
//! at once with 503 and `Retry-After` once it is known, reads that need no database keep working, nothing
//! acknowledged is lost and the operator is told once each way; a fleet replica whose NATS is down refuses
//! a join at once; a call whose connection never comes up is one WARN line, not one per media tick.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use confab_tests::caller::{client_config, offer, token_of};
use confab_tests::fleet::{self, Nats};
use confab_tests::private_postgres::PrivatePostgres;
use confab_tests::scratch;
use confab_tests::server::{Server, api, create_key, wait_for_preload, wait_for_status};
use confab_worker::media::peer::Offerer;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

const DATABASE_UNAVAILABLE: &str =
    "Service unavailable: the database is not answering; retry after the Retry-After seconds";

fn agent_body(name: &str) -> Value {
    json!({ "agent_name": name, "agent_system_prompt": "Be brief.", "avatars": [{ "avatar_key_id": "stock-amara" }] })
}

async fn get(client: &reqwest::Client, key: &str, url: &str) -> reqwest::Response {
    client.get(url).header("x-api-key", key).send().await.unwrap()
}

/// Waits (30 s at most) until `GET url` answers `status`.
async fn until_status(client: &reqwest::Client, key: &str, url: &str, status: StatusCode) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while get(client, key, url).await.status() != status {
        assert!(Instant::now() < deadline, "{url} never answered {status}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Creates an agent every 200 ms until `stop`; the ids of those acknowledged (200), and the longest wait.
async fn write_agents(
    client: reqwest::Client,
    base: String,
    key: String,
    stop: Arc<AtomicBool>,
) -> (Vec<String>, Duration) {
    let (mut acknowledged, mut longest) = (Vec::new(), Duration::ZERO);
    let mut n = 0;
    while !stop.load(Ordering::Relaxed) {
        n += 1;
        let asked = Instant::now();
        let response = client
            .post(format!("{base}/v1/ext/agent"))
            .header("x-api-key", &key)
            .json(&agent_body(&format!("Writer {n}")))
            .send()
            .await
            .unwrap();
        longest = longest.max(asked.elapsed());
        if response.status() == StatusCode::OK {
            acknowledged.push(response.json::<Value>().await.unwrap()["id"].as_str().unwrap().to_string());
        } else {
            assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE, "{}", response.text().await.unwrap());
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    (acknowledged, longest)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_outage_is_answered_at_once_and_loses_nothing() {
    let dir = scratch("db-outage");
    let mut postgres = PrivatePostgres::start(&dir);
    let key = fleet::create_key(&postgres.url);
    let data = dir.join("data");
    let server = Server::start(&data, &["--database-url", &postgres.url, "--no-media"]).await;
    let (client, base) = (reqwest::Client::new(), server.base.clone());
    let agents = format!("{base}/v1/ext/agent");
    let known = api(&client, &key, Method::POST, agents.clone(), Some(agent_body("Known"))).await;
    let known = known["id"].as_str().unwrap().to_string();
    let stop = Arc::new(AtomicBool::new(false));
    let writer = tokio::spawn(write_agents(client.clone(), base.clone(), key.clone(), stop.clone()));
    tokio::time::sleep(Duration::from_millis(1500)).await;

    postgres.stop();
    until_status(&client, &key, &agents, StatusCode::SERVICE_UNAVAILABLE).await;
    // Known: every request that needs the database is refused at once, saying so.
    for url in [agents.clone(), format!("{agents}/{known}"), format!("{base}/v1/ext/conversation")] {
        let asked = Instant::now();
        let response = get(&client, &key, &url).await;
        let waited = asked.elapsed();
        assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE, "{url}");
        assert!(waited < Duration::from_secs(1), "{url} took {waited:?}");
        assert_eq!(response.headers()["retry-after"], "2");
        assert_eq!(response.json::<Value>().await.unwrap()["error"], DATABASE_UNAVAILABLE);
    }
    // What needs no database still answers a key seen recently; a key it cannot check is not called bad.
    assert_eq!(get(&client, &key, &format!("{base}/v1/ext/avatars")).await.status(), StatusCode::OK);
    assert_eq!(get(&client, "cfb_never_seen", &agents).await.status(), StatusCode::SERVICE_UNAVAILABLE);
    let metrics = get(&client, &key, &format!("{base}/metrics")).await.text().await.unwrap();
    assert!(metrics.contains("confab_database_up 0"), "{metrics}");
    tokio::time::sleep(Duration::from_secs(2)).await;

    postgres.start_again();
    until_status(&client, &key, &agents, StatusCode::OK).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    stop.store(true, Ordering::Relaxed);
    let (acknowledged, longest) = writer.await.unwrap();
    // Writes caught as the database went wait at most the pool's acquire timeout (5 s); none hangs.
    assert!(longest < Duration::from_secs(7), "a write waited {longest:?}");
    assert!(acknowledged.len() >= 10, "{acknowledged:?}");
    for id in &acknowledged {
        api(&client, &key, Method::GET, format!("{agents}/{id}"), None).await;
    }
    let log = std::fs::read_to_string(data.join("serve.log")).unwrap();
    assert_eq!(log.matches("the database is not answering").count(), 1, "{log}");
    assert_eq!(log.matches("the database answers again").count(), 1, "{log}");
    drop(server);
    drop(postgres);
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_join_is_refused_at_once_while_the_fleets_nats_is_down() {
    let dir = scratch("nats-outage");
    let mut nats = Nats::start(&dir);
    let database = fleet::fresh_database("faults_nats_outage");
    let key = fleet::create_key(&database);
    let data = dir.join("replica");
    let replica = Server::start(&data, &["--database-url", &database, "--nats", &nats.url]).await;
    let (client, base) = (reqwest::Client::new(), replica.base.clone());
    let agent = api(&client, &key, Method::POST, format!("{base}/v1/ext/agent"), Some(agent_body("Fleet"))).await;
    let body = json!({ "agent_id": agent["id"], "user_name": "Ada", "user_id": "ada" });
    let conversation = api(&client, &key, Method::POST, format!("{base}/v1/ext/conversation"), Some(body)).await;
    let id = conversation["id"].as_str().unwrap();

    nats.stop();
    let log = || std::fs::read_to_string(data.join("serve.log")).unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while !log().contains("lost the connection to NATS") {
        assert!(Instant::now() < deadline, "the replica never noticed:\n{}", log());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for _ in 0..3 {
        let asked = Instant::now();
        let response = offer(&client, &base, id, &token_of(&conversation), "v=0\r\n".into()).await;
        let waited = asked.elapsed();
        assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert!(waited < Duration::from_secs(1), "the join took {waited:?}");
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(log().matches("lost the connection to NATS").count(), 1, "told once:\n{}", log());
    let metrics = get(&client, &key, &format!("{base}/metrics")).await.text().await.unwrap();
    assert!(metrics.contains("confab_nats_connected 0"), "{metrics}");
    drop(replica);
    fleet::drop_database(&database);
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_that_never_connects_is_one_line_in_the_log() {
    let dir = scratch("never-connects");
    let data = dir.join("data");
    let key = create_key(&data);
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    // The log as it is by default (no RUST_LOG of the operator's).
    let env = [("RUST_LOG", Path::new(confab_worker::DEFAULT_LOG_FILTER))];
    let server = Server::start_with_env(&data, port, &["--no-media-timeout", "2"], &env).await;
    wait_for_preload(&data).await;
    let (client, base) = (reqwest::Client::new(), server.base.clone());
    let agent = api(&client, &key, Method::POST, format!("{base}/v1/ext/agent"), Some(agent_body("Alone"))).await;
    let body = json!({ "agent_id": agent["id"], "user_name": "Ada", "user_id": "ada" });
    let conversation = api(&client, &key, Method::POST, format!("{base}/v1/ext/conversation"), Some(body)).await;
    let id = conversation["id"].as_str().unwrap();
    let log = || std::fs::read_to_string(data.join("serve.log")).unwrap();
    let before = log().lines().count();

    // An offer whose side goes away at once: the server's ICE checks find nobody.
    let offerer = Offerer::new(&client_config()).await.unwrap();
    let response = offer(&client, &base, id, &token_of(&conversation), offerer.offer_sdp.clone()).await;
    assert_eq!(response.status(), StatusCode::CREATED);
    offerer.connection.close().await.unwrap();
    drop(offerer);
    wait_for_status(&client, &key, &base, id, "ENDED", Duration::from_secs(30)).await;
    tokio::time::sleep(Duration::from_secs(1)).await;

    let text = log();
    let during: Vec<&str> = text.lines().skip(before).collect();
    let warnings: Vec<&&str> = during.iter().filter(|line| line.contains(" WARN ")).collect();
    assert!(warnings.len() <= 2, "{during:#?}");
    let told: Vec<&&str> = during.iter().filter(|line| line.contains("never came up")).collect();
    assert_eq!(told.len(), 1, "{during:#?}");
    assert!(told[0].contains("candidates=udp 127.0.0.1:") && told[0].contains(id), "{}", told[0]);
    assert!(during.len() <= 12, "a handful of lines, not one per tick: {during:#?}");
    let metrics = get(&client, &key, &format!("{base}/metrics")).await.text().await.unwrap();
    assert!(metrics.contains("confab_calls_never_connected_total 1"), "{metrics}");
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}
