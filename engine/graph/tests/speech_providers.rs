//! Speech providers: the local espeak-ng voice on the real VAD, and the OpenAI-compatible speech and
//! transcription endpoints against a local server speaking their wire format (raw PCM streamed in odd
//! chunks; multipart WAV upload answered with JSON).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{Multipart, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use confab_engine::providers::CallPolicy;
use confab_engine::providers::openai_audio::OpenAiAudio;
use confab_engine::providers::tts::{EspeakVoice, SpeechSynthesizer, TtsEvent};
use confab_models::silero::{SileroState, SileroVad, WINDOW};
use serde_json::{Value, json};

async fn collect_audio(synth: &dyn SpeechSynthesizer, text: &str) -> Result<Vec<f32>, String> {
    let mut stream = synth.synthesize(text);
    let mut audio = Vec::new();
    while let Some(event) = stream.recv().await {
        match event {
            Ok(TtsEvent::Audio(chunk)) => audio.extend(chunk),
            Ok(TtsEvent::Done(metrics)) => assert!(metrics.time_to_first.is_some()),
            Err(err) => return Err(err.to_string()),
        }
    }
    Ok(audio)
}

#[tokio::test]
async fn espeak_voice_speaks_what_the_vad_hears_as_speech() {
    let audio =
        collect_audio(&EspeakVoice::default(), "The train to the airport leaves from platform nine.").await.unwrap();
    let seconds = audio.len() as f32 / 16_000.0;
    assert!((1.5..6.0).contains(&seconds), "{seconds} s");
    assert!(speech_fraction(&audio) > 0.5, "mostly speech");
}

#[tokio::test]
async fn piper_voice_speaks_what_the_vad_hears_as_speech() {
    let piper = confab_engine::providers::piper_tts::PiperTts::load(&confab_models::default_models_dir())
        .expect("models are fetched");
    let audio = collect_audio(&piper, "The train to the airport leaves from platform nine.").await.unwrap();
    let seconds = audio.len() as f32 / 16_000.0;
    assert!((1.5..6.0).contains(&seconds), "{seconds} s");
    assert!(speech_fraction(&audio) > 0.5, "mostly speech");
    // Clause punctuation reaches the model: a comma makes a longer utterance than none.
    let with_pause = collect_audio(&piper, "Yes, please.").await.unwrap().len();
    let without = collect_audio(&piper, "Yes please.").await.unwrap().len();
    assert!(with_pause > without, "{with_pause} vs {without}");
}

#[tokio::test]
async fn piper_streams_a_sentence_in_pieces_the_first_one_short() {
    let piper = confab_engine::providers::piper_tts::PiperTts::load(&confab_models::default_models_dir())
        .expect("models are fetched");
    let sentence = "The largest planet in our solar system is Jupiter, the fifth planet from the Sun.";
    let mut stream = piper.synthesize(sentence);
    let mut pieces = Vec::new();
    while let Some(event) = stream.recv().await {
        match event.unwrap() {
            TtsEvent::Audio(piece) => pieces.push(piece),
            TtsEvent::Done(metrics) => assert!(metrics.time_to_first.unwrap() < metrics.duration),
        }
    }
    // The first piece is 16 of the voice's frames (256 samples each at 22.05 kHz: 0.19 s), resampled;
    // the later ones 128 frames (1.5 s) but the last.
    let seconds: Vec<f32> = pieces.iter().map(|piece| piece.len() as f32 / 16_000.0).collect();
    assert!(seconds.len() >= 3, "{seconds:?}");
    assert!((0.1..0.25).contains(&seconds[0]), "{seconds:?}");
    assert!((1.3..1.6).contains(&seconds[1]), "{seconds:?}");
    // Whole, it is as long as the sentence rendered at once (the voice's noise changes the durations a
    // little from run to run) and mostly speech.
    let streamed: Vec<f32> = pieces.concat();
    let whole = piper.render(sentence).unwrap();
    let ratio = streamed.len() as f32 / whole.len() as f32;
    assert!((0.85..1.15).contains(&ratio), "{} vs {} samples", streamed.len(), whole.len());
    assert!(speech_fraction(&streamed) > 0.5, "mostly speech");
}

fn speech_fraction(audio: &[f32]) -> f32 {
    let mut vad = SileroVad::load(&confab_models::default_models_dir(), 1, 1).unwrap();
    let mut state = SileroState::default();
    let (mut speech, mut windows) = (0, 0);
    for window in audio.chunks_exact(WINDOW) {
        let mut p = [0.0];
        vad.infer(&[window], &mut [&mut state], &mut p).unwrap();
        windows += 1;
        speech += usize::from(p[0] > 0.5);
    }
    speech as f32 / windows.max(1) as f32
}

#[derive(Default)]
struct Server {
    requests: AtomicUsize,
    last: std::sync::Mutex<Value>,
}

async fn speech(State(server): State<Arc<Server>>, headers: HeaderMap, body: String) -> Response {
    server.requests.fetch_add(1, Ordering::SeqCst);
    let body: Value = serde_json::from_str(&body).unwrap();
    *server.last.lock().unwrap() = body.clone();
    if headers.get("authorization").and_then(|v| v.to_str().ok()) != Some("Bearer k") {
        return (StatusCode::UNAUTHORIZED, axum::Json(json!({ "error": { "message": "bad key" } }))).into_response();
    }
    if body["input"] == "" {
        return (StatusCode::BAD_REQUEST, axum::Json(json!({ "error": { "message": "input is empty" } })))
            .into_response();
    }
    // One second of a 24 kHz tone as 16-bit little-endian PCM, in odd-sized chunks.
    let pcm: Vec<u8> = (0..24_000).flat_map(|i| (((i as f32 * 0.05).sin() * 9000.0) as i16).to_le_bytes()).collect();
    let chunks: Vec<Vec<u8>> = pcm.chunks(7_777).map(<[u8]>::to_vec).collect();
    let stream = futures_util::stream::iter(chunks.into_iter().map(Ok::<_, std::io::Error>));
    Response::builder().header("content-type", "audio/pcm").body(Body::from_stream(stream)).unwrap()
}

async fn transcriptions(State(server): State<Arc<Server>>, mut multipart: Multipart) -> Response {
    let attempt = server.requests.fetch_add(1, Ordering::SeqCst);
    if attempt == 0 {
        return (StatusCode::SERVICE_UNAVAILABLE, "try again").into_response();
    }
    let (mut model, mut wav) = (String::new(), Vec::new());
    while let Some(field) = multipart.next_field().await.unwrap() {
        match field.name().unwrap() {
            "model" => model = field.text().await.unwrap(),
            "file" => wav = field.bytes().await.unwrap().to_vec(),
            _ => {}
        }
    }
    let reader = hound::WavReader::new(std::io::Cursor::new(wav)).unwrap();
    let text = format!(" {model} heard {} samples at {} Hz ", reader.len(), reader.spec().sample_rate);
    axum::Json(json!({ "text": text })).into_response()
}

async fn start() -> (Arc<Server>, String) {
    let server = Arc::new(Server::default());
    let app = Router::new()
        .route("/v1/audio/speech", post(speech))
        .route("/v1/audio/transcriptions", post(transcriptions))
        .with_state(server.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}/v1", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (server, base)
}

fn policy() -> CallPolicy {
    CallPolicy { backoff: Duration::from_millis(10), ..CallPolicy::default() }
}

#[tokio::test]
async fn openai_speech_streams_pcm_resampled_to_16k() {
    let (server, base) = start().await;
    let tts = OpenAiAudio::new(base.clone(), Some("k".into()), "tts-1", "alloy", policy());
    let audio = collect_audio(&tts, "Hello there.").await.unwrap();
    // One second at 24 kHz is 16,000 samples at 16 kHz, less the last partial 20 ms chunk.
    assert!((15_600..=16_000).contains(&audio.len()), "{}", audio.len());
    assert!(audio.iter().any(|s| s.abs() > 0.2));
    let body = server.last.lock().unwrap().clone();
    assert_eq!(body, json!({ "model": "tts-1", "input": "Hello there.", "voice": "alloy", "response_format": "pcm" }));

    let error = collect_audio(&tts, "").await.unwrap_err();
    assert!(error.contains("400") && error.contains("input is empty"), "{error}");
    let wrong = OpenAiAudio::new(base, Some("nope".into()), "tts-1", "alloy", policy());
    assert!(collect_audio(&wrong, "Hi.").await.unwrap_err().contains("401"));
}

#[tokio::test]
async fn openai_transcription_uploads_a_wav_and_retries_a_503() {
    let (server, base) = start().await;
    let stt = OpenAiAudio::new(base, Some("k".into()), "whisper-1", "", policy());
    let text = stt.transcribe(&vec![0.1; 16_000]).await.unwrap();
    assert_eq!(text, "whisper-1 heard 16000 samples at 16000 Hz");
    assert_eq!(server.requests.load(Ordering::SeqCst), 2);
}
