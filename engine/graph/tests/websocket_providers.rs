//! The WebSocket adapters against local servers speaking each provider's wire protocol: Deepgram live
//! `Results` (interim, final, `CloseStream`), ElevenLabs `stream-input` (`audio`/`isFinal`), Cartesia
//! (`chunk`/`done`/`error`); refused handshakes and mid-stream disconnects.

use std::sync::{Arc, Mutex};

use base64::Engine;
use confab_engine::providers::CallPolicy;
use confab_engine::providers::deepgram::{DeepgramStt, SttEvent};
use confab_engine::providers::tts::{SpeechSynthesizer, TtsEvent};
use confab_engine::providers::ws_tts::{WsTts, WsVoice};
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::handshake::server::{ErrorResponse, Request, Response};
use tokio_tungstenite::tungstenite::http::StatusCode;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;

type Seen = Arc<Mutex<Vec<String>>>;

/// A WebSocket server on loopback: checks `header` equals `expected` (401 otherwise), records the request
/// URI, then runs `scenario` on the socket.
async fn serve<F, Fut>(header: &'static str, expected: &'static str, scenario: F) -> (String, Seen)
where
    F: Fn(tokio_tungstenite::WebSocketStream<tokio::net::TcpStream>, String) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("ws://{}", listener.local_addr().unwrap());
    let seen: Seen = Arc::default();
    let record = seen.clone();
    let scenario = Arc::new(scenario);
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let (record, scenario) = (record.clone(), scenario.clone());
            tokio::spawn(async move {
                let uri = Arc::new(Mutex::new(String::new()));
                let uri_in = uri.clone();
                let callback = move |request: &Request, response: Response| -> Result<Response, ErrorResponse> {
                    *uri_in.lock().unwrap() = request.uri().to_string();
                    if request.headers().get(header).and_then(|v| v.to_str().ok()) != Some(expected) {
                        let mut refused = ErrorResponse::new(Some("invalid credentials".into()));
                        *refused.status_mut() = StatusCode::UNAUTHORIZED;
                        return Err(refused);
                    }
                    Ok(response)
                };
                if let Ok(socket) = tokio_tungstenite::accept_hdr_async(stream, callback).await {
                    let uri = uri.lock().unwrap().clone();
                    record.lock().unwrap().push(uri.clone());
                    scenario(socket, uri).await;
                }
            });
        }
    });
    (url, seen)
}

fn pcm_base64(samples: usize) -> String {
    let bytes: Vec<u8> =
        (0..samples).flat_map(|i| (((i as f32 * 0.07).sin() * 10_000.0) as i16).to_le_bytes()).collect();
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

async fn synthesize(tts: &WsTts, text: &str) -> Result<usize, String> {
    let mut stream = tts.synthesize(text);
    let mut samples = 0;
    while let Some(event) = stream.recv().await {
        match event {
            Ok(TtsEvent::Audio(audio)) => samples += audio.len(),
            Ok(TtsEvent::Done(_)) => return Ok(samples),
            Err(err) => return Err(err.to_string()),
        }
    }
    Err("the stream ended without Done".into())
}

#[tokio::test]
async fn deepgram_streams_interim_and_final_results() {
    let (url, seen) = serve("authorization", "Token dg-key", |mut socket, _| async move {
        let mut audio_bytes = 0;
        let mut sent_interim = false;
        while let Some(Ok(message)) = socket.next().await {
            match message {
                Message::Binary(bytes) => {
                    audio_bytes += bytes.len();
                    if audio_bytes >= 16_000 && !sent_interim {
                        sent_interim = true;
                        let interim = json!({ "type": "Results", "is_final": false, "speech_final": false, "channel": { "alternatives": [{ "transcript": "when does", "confidence": 0.8 }] } });
                        socket.send(Message::text(interim.to_string())).await.unwrap();
                    }
                }
                Message::Text(text) if text.contains("CloseStream") => {
                    let last = json!({ "type": "Results", "is_final": true, "speech_final": true, "channel": { "alternatives": [{ "transcript": format!("when does the library open ({audio_bytes} bytes)"), "confidence": 0.97 }] } });
                    socket.send(Message::text(last.to_string())).await.unwrap();
                    socket.send(Message::text(json!({ "type": "Metadata", "duration": 1.0 }).to_string())).await.unwrap();
                    socket.close(None).await.unwrap();
                    return;
                }
                _ => {}
            }
        }
    })
    .await;
    let mut stt = DeepgramStt::new("dg-key".into(), "nova-3".into());
    stt.url = format!("{url}/v1/listen");
    let session = stt.start().await.unwrap();
    let mut results = session.results;
    for _ in 0..50 {
        session.audio.send(vec![0.1; 320]).await.unwrap();
    }
    drop(session.audio);
    let mut events = Vec::new();
    while let Some(event) = results.recv().await {
        events.push(event.unwrap());
    }
    assert_eq!(
        events,
        [
            SttEvent::Interim("when does".into()),
            SttEvent::Final { text: "when does the library open (32000 bytes)".into(), speech_final: true }
        ]
    );
    let uri = seen.lock().unwrap()[0].clone();
    assert!(
        uri.starts_with("/v1/listen?model=nova-3&encoding=linear16&sample_rate=16000&channels=1&interim_results=true"),
        "{uri}"
    );

    // The whole-utterance helper joins the finals.
    assert_eq!(stt.transcribe(&vec![0.0; 16_000]).await.unwrap(), "when does the library open (32000 bytes)");

    stt.api_key = "wrong".into();
    let error = stt.start().await.err().unwrap();
    assert_eq!((error.status, error.retryable), (Some(401), false), "{error:?}");
}

#[tokio::test]
async fn elevenlabs_streams_pcm_until_is_final() {
    let (url, seen) = serve("xi-api-key", "el-key", |mut socket, uri| async move {
        let mut texts = Vec::new();
        while let Some(Ok(Message::Text(text))) = socket.next().await {
            let message: Value = serde_json::from_str(&text).unwrap();
            let chunk = message["text"].as_str().unwrap().to_string();
            texts.push(chunk.clone());
            if chunk.is_empty() {
                break;
            }
        }
        assert_eq!(texts[0], " ", "the first message opens the stream");
        if uri.contains("/drop/") {
            socket
                .send(Message::text(json!({ "audio": pcm_base64(800), "isFinal": false }).to_string()))
                .await
                .unwrap();
            drop(socket); // disconnect mid-stream
            return;
        }
        for _ in 0..3 {
            socket
                .send(Message::text(
                    json!({ "audio": pcm_base64(1600), "isFinal": false, "normalizedAlignment": null }).to_string(),
                ))
                .await
                .unwrap();
        }
        socket.send(Message::text(json!({ "isFinal": true }).to_string())).await.unwrap();
        let _ = socket.close(None).await;
    })
    .await;
    let voice = |voice_id: &str, key: &str| WsTts {
        voice: WsVoice::ElevenLabs {
            base_url: url.clone(),
            api_key: key.into(),
            voice_id: voice_id.into(),
            model_id: "eleven_flash_v2_5".into(),
        },
        policy: CallPolicy::default(),
    };
    assert_eq!(synthesize(&voice("voice1", "el-key"), "Hello there.").await.unwrap(), 4_800);
    assert_eq!(
        seen.lock().unwrap()[0],
        "/v1/text-to-speech/voice1/stream-input?model_id=eleven_flash_v2_5&output_format=pcm_16000"
    );
    let broken = synthesize(&voice("drop", "el-key"), "Hello.").await.unwrap_err();
    assert!(broken.contains("the connection broke") || broken.contains("before the end of the audio"), "{broken}");
    let refused = synthesize(&voice("voice1", "bad"), "Hello.").await.unwrap_err();
    assert!(refused.contains("401"), "{refused}");
}

#[tokio::test]
async fn cartesia_streams_chunks_until_done_and_reports_errors() {
    let (url, _) = serve("x-api-key", "ca-key", |mut socket, _| async move {
        let Some(Ok(Message::Text(text))) = socket.next().await else { return };
        let request: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(request["output_format"], json!({ "container": "raw", "encoding": "pcm_s16le", "sample_rate": 16000 }));
        assert_eq!(request["voice"], json!({ "mode": "id", "id": "v-42" }));
        if request["transcript"] == "" {
            let error = json!({ "type": "error", "error": "transcript must not be empty", "status_code": 400, "done": true, "context_id": "confab" });
            socket.send(Message::text(error.to_string())).await.unwrap();
            return;
        }
        for _ in 0..2 {
            let chunk = json!({ "type": "chunk", "data": pcm_base64(2400), "done": false, "status_code": 206, "step_time": 12.0, "context_id": "confab" });
            socket.send(Message::text(chunk.to_string())).await.unwrap();
        }
        socket.send(Message::text(json!({ "type": "done", "done": true, "status_code": 200, "context_id": "confab" }).to_string())).await.unwrap();
        let _ = socket.send(Message::Close(Some(CloseFrame { code: 1000.into(), reason: "".into() }))).await;
    })
    .await;
    let tts = WsTts {
        voice: WsVoice::Cartesia {
            base_url: url,
            api_key: "ca-key".into(),
            voice_id: "v-42".into(),
            model_id: "sonic-2".into(),
        },
        policy: CallPolicy::default(),
    };
    assert_eq!(synthesize(&tts, "Welcome to the library.").await.unwrap(), 4_800);
    let error = synthesize(&tts, "").await.unwrap_err();
    assert!(error.contains("transcript must not be empty"), "{error}");
}
