//! The WebRTC transport of live calls, over loopback UDP: our answering side (`media::peer::negotiate`,
//! `call::send_voice`, `call::receive_voice`, on the server's tokio runtime) against browser-like
//! offerers (`media::peer::Offerer`, on a second runtime), Opus both ways at 50 packets a second.
//!
//! - Voice latency: a 20 ms frame of the agent's voice written to the engine's output ring → the first
//!   RTP packet of it received by the other end (Opus encode, SRTP, UDP, SRTP, depacketize), p50/p99/max,
//!   on an idle worker and with the other calls running.
//! - Sessions per core: server-runtime CPU per call-second (thread CPU from /proc), its inverse, and
//!   memory per call (RSS growth / calls).
//!
//! `cargo bench -p confab-benches --bench webrtc [-- CALLS [SECONDS]]` (default 40 calls, 10 s). Under
//! `cargo test` (no `--bench` argument) it runs a 2-call smoke case.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use confab_benches::percentile;
use confab_benches::rss_bytes;
use confab_engine::audio::opus_egress::{FRAME_16K, OpusEgress};
use confab_worker::media::MediaConfig;
use confab_worker::media::call::{MediaClock, ReceivingCall, VoiceTrack, receive_voice, send_voice};
use confab_worker::media::peer::{Offerer, negotiate};
use confab_worker::media::recording_slot::RecordingSlot;
use confab_worker::session_binding::LoadCounters;
use rtc::media::Sample;
use rtc::rtp_transceiver::rtp_sender::RtpCodecKind;
use tokio::runtime::Runtime;
use tokio::sync::mpsc;
use webrtc::media_stream::track_remote::{TrackRemote, TrackRemoteEvent};
use webrtc::peer_connection::{PeerConnection, RTCPeerConnectionState};

const SERVER_THREADS: &str = "confab-server";
const CLIENT_THREADS: &str = "confab-client";
const FRAME: Duration = Duration::from_millis(20);

fn config() -> MediaConfig {
    let scratch = std::env::temp_dir();
    MediaConfig::new(std::net::IpAddr::from([127, 0, 0, 1]), scratch.clone(), scratch)
}

fn speechlike(n: usize, seed: f32) -> Vec<f32> {
    (0..n).map(|i| (i as f32 * 0.031 + seed).sin() * (i as f32 * 0.0007 + seed).sin() * 0.4).collect()
}

/// One call: the server's end (rings standing in for the engine) and the offerer's end.
struct Call {
    /// The engine's output ring (the agent's voice), written by the benchmark.
    voice: rtrb::Producer<f32>,
    /// Arrival times of the agent's packets at the offerer.
    heard: mpsc::UnboundedReceiver<Instant>,
    /// The participant's audio that reached the engine's input ring, in samples.
    received: Arc<AtomicU64>,
    connections: [Arc<dyn PeerConnection>; 2],
}

async fn connected(mut state: tokio::sync::watch::Receiver<RTCPeerConnectionState>) {
    while *state.borrow_and_update() != RTCPeerConnectionState::Connected {
        state.changed().await.expect("the connection is alive");
    }
}

async fn first_audio_track(tracks: &mut mpsc::Receiver<Arc<dyn TrackRemote>>) -> Arc<dyn TrackRemote> {
    loop {
        let track = tracks.recv().await.expect("a remote audio track");
        if track.kind().await == RtpCodecKind::Audio {
            return track;
        }
    }
}

/// Sets up one call: negotiation on each runtime, then the four media tasks.
fn open_call(server: &Runtime, client: &Runtime, microphone: Arc<Vec<Bytes>>) -> Call {
    let config = config();
    let offerer = client.block_on(Offerer::new(&config)).expect("offer");
    let mut negotiated = server.block_on(negotiate(&config, offerer.offer_sdp.clone())).expect("answer");
    let payload_type = client.block_on(offerer.accept(negotiated.answer_sdp.clone())).expect("accept");
    client.block_on(connected(offerer.state.clone()));
    server.block_on(connected(negotiated.state.clone()));

    // Server: the agent's voice out, the participant's voice in.
    let (voice, output) = rtrb::RingBuffer::new(16_000);
    let (mut input, mut engine_input) = rtrb::RingBuffer::<f32>::new(16_000);
    let track = VoiceTrack {
        track: negotiated.audio.clone(),
        ssrc: negotiated.audio_ssrc,
        payload_type: negotiated.audio_payload_type,
    };
    server.spawn(send_voice(output, track, RecordingSlot::default(), None));
    let received = Arc::new(AtomicU64::new(0));
    let mut remote_tracks = std::mem::replace(&mut negotiated.remote_tracks, mpsc::channel(1).1);
    server.spawn(async move {
        let track = first_audio_track(&mut remote_tracks).await;
        let (first_packet, _) = tokio::sync::oneshot::channel();
        receive_voice(
            track,
            &mut input,
            &LoadCounters::default(),
            &MediaClock::default(),
            ReceivingCall {
                first_packet: &mut Some(first_packet),
                recording: &RecordingSlot::default(),
                conversation_id: "bench",
            },
        )
        .await;
    });
    let drained = received.clone();
    server.spawn(async move {
        // The engine's media thread, reading its input ring every 20 ms.
        let mut tick = tokio::time::interval(FRAME);
        loop {
            tick.tick().await;
            let n = engine_input.slots();
            if let Ok(chunk) = engine_input.read_chunk(n) {
                chunk.commit_all();
            }
            drained.fetch_add(n as u64, Ordering::Relaxed);
            if engine_input.is_abandoned() {
                return;
            }
        }
    });

    // Offerer: a microphone sending pre-encoded Opus every 20 ms; a speaker noting arrivals.
    let (heard_tx, heard) = mpsc::unbounded_channel();
    let (mut remote_tracks, audio, ssrc) = (offerer.remote_tracks, offerer.audio.clone(), offerer.audio_ssrc);
    client.spawn(async move {
        let track = first_audio_track(&mut remote_tracks).await;
        while let Some(event) = track.poll().await {
            if let TrackRemoteEvent::OnRtpPacket(_) = event
                && heard_tx.send(Instant::now()).is_err()
            {
                return;
            }
        }
    });
    client.spawn(async move {
        let mut tick = tokio::time::interval(FRAME);
        for packet in microphone.iter().cycle() {
            tick.tick().await;
            let sample = Sample { data: packet.clone(), duration: FRAME, ..Sample::new(Instant::now()) };
            if audio.sample_writer(ssrc, payload_type).write_sample(&sample).await.is_err() {
                return;
            }
        }
    });
    Call { voice, heard, received, connections: [negotiated.connection.clone(), offerer.connection.clone()] }
}

/// Writes one frame of voice and waits for its first packet at the other end.
fn probe(call: &mut Call, frame: &[f32], client: &Runtime) -> Duration {
    while call.heard.try_recv().is_ok() {}
    let written = Instant::now();
    call.voice.write_chunk_uninit(frame.len()).expect("room in the ring").fill_from_iter(frame.iter().copied());
    let arrived = client
        .block_on(async { tokio::time::timeout(Duration::from_secs(2), call.heard.recv()).await })
        .expect("the packet arrives within 2 s")
        .expect("the call is up");
    arrived.duration_since(written)
}

/// `probes` latency samples on `call`, spaced irregularly so they fall anywhere in the send tick.
fn latencies(call: &mut Call, probes: usize, client: &Runtime) -> Vec<Duration> {
    let frame = speechlike(FRAME_16K, 0.5);
    let mut samples: Vec<Duration> = (0..probes)
        .map(|i| {
            std::thread::sleep(Duration::from_millis(37 + (i as u64 * 7) % 23));
            probe(call, &frame, client)
        })
        .collect();
    samples.sort();
    samples
}

fn describe(label: &str, sorted: &[Duration]) {
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!(
        "{label}: p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms ({} probes)",
        ms(percentile(sorted, 0.5)),
        ms(percentile(sorted, 0.99)),
        ms(*sorted.last().unwrap()),
        sorted.len()
    );
}

/// CPU seconds (user + system) of this process's threads whose name starts with `prefix`.
fn thread_cpu_seconds(prefix: &str) -> f64 {
    let mut ticks = 0u64;
    for task in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
        let name = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        if !name.starts_with(&prefix[..prefix.len().min(15)]) {
            continue;
        }
        let stat = std::fs::read_to_string(task.path().join("stat")).unwrap_or_default();
        let fields: Vec<&str> = stat.rsplit(')').next().unwrap_or_default().split_whitespace().collect();
        if fields.len() > 12 {
            ticks += fields[11].parse::<u64>().unwrap_or(0) + fields[12].parse::<u64>().unwrap_or(0);
        }
    }
    ticks as f64 / 100.0
}

fn runtime(name: &str) -> Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).thread_name(name).enable_all().build().unwrap()
}

fn main() {
    let benching = std::env::args().any(|a| a == "--bench");
    let numbers: Vec<u64> = std::env::args().filter_map(|a| a.parse().ok()).collect();
    let (calls, seconds, probes) = if benching {
        (numbers.first().copied().unwrap_or(40) as usize, numbers.get(1).copied().unwrap_or(10), 300)
    } else {
        (2, 1, 10)
    };
    let server = runtime(SERVER_THREADS);
    let client = runtime(CLIENT_THREADS);
    let mut encoder = OpusEgress::new().unwrap();
    let microphone: Arc<Vec<Bytes>> = Arc::new(
        speechlike(FRAME_16K * 50, 1.0)
            .chunks(FRAME_16K)
            .map(|f| Bytes::copy_from_slice(encoder.encode(f).unwrap()))
            .collect(),
    );

    let rss_before = rss_bytes();
    let mut open: Vec<Call> = (0..calls).map(|_| open_call(&server, &client, microphone.clone())).collect();
    let rss_after = rss_bytes();
    describe("voice latency, idle worker", &latencies(&mut open[0], probes, &client));

    // Every call but the first carries the agent's voice continuously; the first is probed meanwhile.
    let voice = speechlike(FRAME_16K, 2.0);
    let feeding = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let feeder = {
        let mut rings: Vec<rtrb::Producer<f32>> =
            open.iter_mut().skip(1).map(|c| std::mem::replace(&mut c.voice, rtrb::RingBuffer::new(1).0)).collect();
        let feeding = feeding.clone();
        let voice = voice.clone();
        std::thread::spawn(move || {
            let start = Instant::now();
            let mut frames = 0u32;
            while feeding.load(Ordering::Relaxed) {
                for ring in &mut rings {
                    if let Ok(chunk) = ring.write_chunk_uninit(FRAME_16K) {
                        chunk.fill_from_iter(voice.iter().copied());
                    }
                }
                frames += 1;
                std::thread::sleep((start + FRAME * frames).saturating_duration_since(Instant::now()));
            }
        })
    };
    let received_before: u64 = open.iter().map(|c| c.received.load(Ordering::Relaxed)).sum();
    let (server_before, client_before, wall) =
        (thread_cpu_seconds(SERVER_THREADS), thread_cpu_seconds(CLIENT_THREADS), Instant::now());
    std::thread::sleep(Duration::from_secs(seconds));
    let elapsed = wall.elapsed().as_secs_f64();
    let server_cpu = thread_cpu_seconds(SERVER_THREADS) - server_before;
    let client_cpu = thread_cpu_seconds(CLIENT_THREADS) - client_before;
    let received: u64 = open.iter().map(|c| c.received.load(Ordering::Relaxed)).sum::<u64>() - received_before;
    let loaded = latencies(&mut open[0], probes.min(100), &client);
    feeding.store(false, Ordering::Relaxed);
    feeder.join().unwrap();

    describe(&format!("voice latency, {calls} calls"), &loaded);
    let per_call_second = server_cpu / (calls as f64 * elapsed);
    println!(
        "{calls} calls for {elapsed:.1} s, Opus both ways: server {:.2} ms CPU per call-second → {:.0} calls per core; \
         offerers {:.2} ms; user audio into the engine at {:.2}× real time; {:.0} KiB per call",
        per_call_second * 1e3,
        if per_call_second > 0.0 { 1.0 / per_call_second } else { f64::INFINITY },
        client_cpu / (calls as f64 * elapsed) * 1e3,
        received as f64 / (calls as f64 * elapsed * 16_000.0),
        rss_after.saturating_sub(rss_before) as f64 / 1024.0 / calls as f64,
    );
    assert!(received > 0, "no user audio reached the engine");
    for call in &open {
        for connection in &call.connections {
            let connection = connection.clone();
            server.block_on(async move { connection.close().await.ok() });
        }
    }
}
