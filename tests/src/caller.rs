//! A participant without a browser: our WebRTC `Offerer` joins a conversation through the real signalling
//! endpoint (session token, SDP offer in, answer out), connects over loopback UDP, and sends Opus from a
//! "microphone": optional speech (16 kHz samples), then quiet noise until it is stopped.

use std::time::{Duration, Instant};

use bytes::Bytes;
use confab_engine::audio::opus_egress::{FRAME_16K, OpusEgress};
use confab_worker::media::MediaConfig;
use confab_worker::media::peer::Offerer;
use rtc::media::Sample;
use webrtc::peer_connection::RTCPeerConnectionState;

/// The offerer's own WebRTC settings (loopback).
pub fn client_config() -> MediaConfig {
    let scratch = std::env::temp_dir();
    MediaConfig::new(std::net::IpAddr::from([127, 0, 0, 1]), scratch.clone(), scratch)
}

/// POSTs `sdp` to the conversation's signalling endpoint with the session token.
pub async fn offer(client: &reqwest::Client, base: &str, id: &str, token: &str, sdp: String) -> reqwest::Response {
    client
        .post(format!("{base}/v1/session/conversation/{id}/webrtc"))
        .bearer_auth(token)
        .header("content-type", "application/sdp")
        .body(sdp)
        .send()
        .await
        .unwrap()
}

/// The session token in a conversation's `join_link`.
pub fn token_of(conversation: &serde_json::Value) -> String {
    conversation["join_link"].as_str().unwrap().split("#token=").nth(1).unwrap().to_string()
}

/// A joined call: the client's connection and the task sending its microphone.
pub struct Caller {
    pub offerer: Offerer,
    pub microphone: tokio::task::JoinHandle<()>,
}

impl Caller {
    /// Joins through `base` (201 expected), waits until connected (30 s), then plays `speech` followed
    /// by quiet noise.
    pub async fn join(client: &reqwest::Client, base: &str, id: &str, token: &str, speech: Vec<f32>) -> Caller {
        let offerer = Offerer::new(&client_config()).await.unwrap();
        let response = offer(client, base, id, token, offerer.offer_sdp.clone()).await;
        let status = response.status();
        let location = response.headers().get("location").map(|v| v.to_str().unwrap().to_string());
        let answer = response.text().await.unwrap();
        assert_eq!(status, 201, "joining {id}: {answer}");
        assert_eq!(location.as_deref(), Some(format!("/v1/session/conversation/{id}/webrtc").as_str()));
        Caller::connect(offerer, answer, speech).await
    }

    /// Accepts `answer` on `offerer`, waits until connected, and starts the microphone.
    pub async fn connect(offerer: Offerer, answer: String, speech: Vec<f32>) -> Caller {
        let payload_type = offerer.accept(answer).await.unwrap();
        let mut state = offerer.state.clone();
        tokio::time::timeout(Duration::from_secs(30), async {
            while *state.borrow_and_update() != RTCPeerConnectionState::Connected {
                state.changed().await.unwrap();
            }
        })
        .await
        .expect("connected within 30 s");
        let (audio, ssrc) = (offerer.audio.clone(), offerer.audio_ssrc);
        let microphone = tokio::spawn(async move {
            let mut encoder = OpusEgress::new().unwrap();
            let noise: Vec<f32> = (0..FRAME_16K).map(|i| ((i * 7919) % 200) as f32 / 20_000.0 - 0.005).collect();
            let mut frames = speech.chunks(FRAME_16K).map(|frame| {
                let mut frame = frame.to_vec();
                frame.resize(FRAME_16K, 0.0);
                frame
            });
            let mut tick = tokio::time::interval(Duration::from_millis(20));
            loop {
                tick.tick().await;
                let frame = frames.next().unwrap_or_else(|| noise.clone());
                let packet = Bytes::copy_from_slice(encoder.encode(&frame).unwrap());
                let sample =
                    Sample { data: packet, duration: Duration::from_millis(20), ..Sample::new(Instant::now()) };
                let _ = audio.sample_writer(ssrc, payload_type).write_sample(&sample).await;
            }
        });
        Caller { offerer, microphone }
    }

    /// Hangs up as the join page's hang-up button does: DELETE the call (with the session token `token`),
    /// then close the connection.
    pub async fn hang_up(&self, client: &reqwest::Client, base: &str, id: &str, token: &str) {
        let url = format!("{base}/v1/session/conversation/{id}/webrtc");
        let _ = client.delete(url).bearer_auth(token).send().await;
        let _ = self.offerer.connection.close().await;
    }

    /// Whether the peer connection is still up.
    pub fn connected(&self) -> bool {
        *self.offerer.state.borrow() == RTCPeerConnectionState::Connected
    }
}

impl Drop for Caller {
    fn drop(&mut self) {
        self.microphone.abort();
    }
}

/// `text` spoken by espeak-ng as 16 kHz mono samples (linear resampling from espeak's 22,050 Hz).
pub fn speech_16k(dir: &std::path::Path, text: &str) -> Vec<f32> {
    let path = dir.join(format!("speech-{}.wav", text.len()));
    crate::spoken_wav(&path, text, 0.3, 0.0);
    let mut reader = hound::WavReader::open(&path).unwrap();
    let rate = reader.spec().sample_rate as f64;
    let samples: Vec<f32> = reader.samples::<i16>().map(|s| s.unwrap() as f32 / 32768.0).collect();
    let out_len = (samples.len() as f64 * 16_000.0 / rate) as usize;
    (0..out_len)
        .map(|i| {
            let position = i as f64 * rate / 16_000.0;
            let (index, fraction) = (position as usize, (position.fract()) as f32);
            let a = samples[index.min(samples.len() - 1)];
            let b = samples[(index + 1).min(samples.len() - 1)];
            a + (b - a) * fraction
        })
        .collect()
}
