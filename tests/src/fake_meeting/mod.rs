//! A local fake of a meeting platform (Google Meet, Zoom or Microsoft Teams) for the meeting bot's tests.
//! The bot's Chromium reaches it at the platform's real host name (`--host-resolver-rules`, given to
//! `confab serve` with `--meeting-browser-arg`) over HTTPS with a self-signed certificate; the other
//! participant's page (`host.html`, in the test's own Chromium) reaches it over plain HTTP on loopback.
//! `client.html` reproduces the platform's join flow with the selectors and texts of the bot's adapter;
//! the meeting's state (who is admitted, removed, speaking; the media offer and answer between the two
//! pages) lives here, and the test drives it (`admit`, `remove`, `end`).

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::extract::{Query, State};
use axum::response::{Html, IntoResponse};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{Value, json};

const CLIENT_HTML: &str = include_str!("client.html");
const HOST_HTML: &str = include_str!("host.html");

/// What the meeting does when the bot asks to join.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    /// Admitted at once.
    Admit,
    /// Kept in the lobby until the test admits it (or forever).
    Hold,
}

#[derive(Debug, Default)]
struct Meeting {
    bot_name: Option<String>,
    bot_email: String,
    /// none, lobby, in_call, refused, removed, ended
    bot_state: String,
    host_speaking: bool,
    host_present: bool,
    offer: Option<(u64, String)>,
    answer: Option<(u64, String)>,
    hold: bool,
}

#[derive(Clone)]
struct Shared {
    platform: &'static str,
    meeting: Arc<Mutex<Meeting>>,
    question_wav: Arc<Vec<u8>>,
}

pub struct FakeMeeting {
    shared: Shared,
    /// HTTPS, where the bot's browser is sent for the platform's host.
    pub tls_addr: SocketAddr,
    /// Plain HTTP on loopback, for the host's page.
    pub http_addr: SocketAddr,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Drop for FakeMeeting {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

impl FakeMeeting {
    /// A fake of `platform` (`google_meet`, `zoom`, `teams`); the host speaks `question_wav` on `speak()`.
    pub async fn start(platform: &'static str, admission: Admission, question_wav: Vec<u8>) -> FakeMeeting {
        let meeting = Meeting {
            bot_state: "none".into(),
            host_present: true,
            hold: admission == Admission::Hold,
            ..Default::default()
        };
        let shared = Shared { platform, meeting: Arc::new(Mutex::new(meeting)), question_wav: Arc::new(question_wav) };
        let app = Router::new()
            .route("/fake/host", get(|| async { Html(HOST_HTML) }))
            .route("/fake/question.wav", get(question))
            .route("/fake/join", post(join))
            .route("/fake/state", get(state))
            .route("/fake/offer", post(post_offer).get(get_offer))
            .route("/fake/answer", post(post_answer).get(get_answer))
            .route("/fake/speaking", post(speaking))
            .fallback(get(client))
            .with_state(shared.clone());
        let http = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let http_addr = http.local_addr().unwrap();
        let plain = app.clone();
        let mut tasks = vec![tokio::spawn(async move {
            axum::serve(http, plain).await.unwrap();
        })];
        let tls = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let tls_addr = tls.local_addr().unwrap();
        tasks.push(tokio::spawn(serve_tls(tls, app)));
        FakeMeeting { shared, tls_addr, http_addr, tasks }
    }

    /// The host's page.
    pub fn host_url(&self) -> String {
        format!("http://{}/fake/host", self.http_addr)
    }

    /// Chromium's host resolver rules: the platforms' hosts lead here, every other name to nowhere (the
    /// bot's browser reaches loopback only, even outside a network namespace).
    pub fn resolver_rule(&self) -> String {
        let to = self.tls_addr;
        let platforms = ["meet.google.com", "*.zoom.us", "zoom.us", "teams.microsoft.com", "teams.live.com"];
        let mapped: Vec<String> = platforms.iter().map(|host| format!("MAP {host} {to}")).collect();
        format!("--host-resolver-rules={},MAP * ~NOTFOUND,EXCLUDE localhost", mapped.join(","))
    }

    fn with<T>(&self, f: impl FnOnce(&mut Meeting) -> T) -> T {
        f(&mut self.shared.meeting.lock().unwrap())
    }

    /// The name the bot joined with, once it asked to join.
    pub fn bot_name(&self) -> Option<String> {
        self.with(|m| m.bot_name.clone())
    }

    pub fn bot_email(&self) -> String {
        self.with(|m| m.bot_email.clone())
    }

    /// none, lobby, in_call, refused, removed or ended.
    pub fn bot_state(&self) -> String {
        self.with(|m| m.bot_state.clone())
    }

    /// Whether the bot's media reached the host (an answer was given to its offer).
    pub fn media_connected(&self) -> bool {
        self.with(|m| m.answer.is_some())
    }

    pub fn admit(&self) {
        self.with(|m| {
            m.hold = false;
            if m.bot_state == "lobby" {
                m.bot_state = "in_call".into();
            }
        })
    }

    pub fn remove_bot(&self) {
        self.with(|m| m.bot_state = "removed".into())
    }

    pub fn end(&self) {
        self.with(|m| m.bot_state = "ended".into())
    }

    /// The host leaves: the bot is alone.
    pub fn host_leaves(&self) {
        self.with(|m| m.host_present = false)
    }
}

async fn client(State(shared): State<Shared>) -> impl IntoResponse {
    let config = format!("<script>window.PLATFORM = {};</script>", json!(shared.platform));
    Html(CLIENT_HTML.replacen("<head>", &format!("<head>{config}"), 1))
}

async fn question(State(shared): State<Shared>) -> impl IntoResponse {
    ([(axum::http::header::CONTENT_TYPE, "audio/wav")], shared.question_wav.as_ref().clone())
}

async fn join(State(shared): State<Shared>, Json(body): Json<Value>) -> Json<Value> {
    let mut m = shared.meeting.lock().unwrap();
    m.bot_name = body["name"].as_str().map(str::to_string);
    m.bot_email = body["email"].as_str().unwrap_or_default().to_string();
    m.bot_state = if m.hold { "lobby" } else { "in_call" }.into();
    Json(json!({}))
}

async fn state(State(shared): State<Shared>) -> Json<Value> {
    let m = shared.meeting.lock().unwrap();
    Json(json!({
        "bot_state": m.bot_state,
        "bot_name": m.bot_name.clone().unwrap_or_default(),
        "host_name": "Ada Lovelace",
        "host_speaking": m.host_speaking,
        "host_present": m.host_present,
    }))
}

async fn post_offer(State(shared): State<Shared>, Json(body): Json<Value>) -> Json<Value> {
    let mut m = shared.meeting.lock().unwrap();
    let id = m.offer.as_ref().map_or(1, |(id, _)| id + 1);
    m.offer = Some((id, body["sdp"].as_str().unwrap_or_default().to_string()));
    Json(json!({ "id": id }))
}

async fn get_offer(State(shared): State<Shared>) -> Json<Value> {
    let m = shared.meeting.lock().unwrap();
    match (&m.offer, m.bot_state.as_str()) {
        (Some((id, sdp)), "in_call") => Json(json!({ "id": id, "sdp": sdp })),
        _ => Json(json!({})),
    }
}

async fn post_answer(State(shared): State<Shared>, Json(body): Json<Value>) -> Json<Value> {
    let mut m = shared.meeting.lock().unwrap();
    m.answer = Some((body["id"].as_u64().unwrap_or(0), body["sdp"].as_str().unwrap_or_default().to_string()));
    Json(json!({}))
}

#[derive(serde::Deserialize)]
struct AnswerQuery {
    id: u64,
}

async fn get_answer(State(shared): State<Shared>, Query(query): Query<AnswerQuery>) -> Json<Value> {
    let m = shared.meeting.lock().unwrap();
    match &m.answer {
        Some((id, sdp)) if *id == query.id => Json(json!({ "sdp": sdp })),
        _ => Json(json!({})),
    }
}

async fn speaking(State(shared): State<Shared>, Json(body): Json<Value>) -> Json<Value> {
    shared.meeting.lock().unwrap().host_speaking = body["speaking"].as_bool().unwrap_or(false);
    Json(json!({}))
}

/// Serves `app` over TLS with a certificate made now for the platforms' host names (self-signed: the
/// bot's browser is told to ignore certificate errors).
async fn serve_tls(listener: tokio::net::TcpListener, app: Router) {
    use hyper_util::rt::{TokioExecutor, TokioIo};
    use hyper_util::service::TowerToHyperService;
    use tokio_rustls::rustls;

    let names = ["meet.google.com", "zoom.us", "*.zoom.us", "teams.microsoft.com", "teams.live.com"];
    let certified = rcgen::generate_simple_self_signed(names.map(str::to_string).to_vec()).unwrap();
    let key = rustls::pki_types::PrivateKeyDer::Pkcs8(certified.signing_key.serialize_der().into());
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![certified.cert.der().clone()], key)
        .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    loop {
        let Ok((stream, _)) = listener.accept().await else { continue };
        let (acceptor, app) = (acceptor.clone(), app.clone());
        tokio::spawn(async move {
            let Ok(stream) = acceptor.accept(stream).await else { return };
            let service = TowerToHyperService::new(app);
            let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                .serve_connection_with_upgrades(TokioIo::new(stream), service)
                .await;
        });
    }
}
