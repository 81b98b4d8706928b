//! Cost per 20 ms frame (or per 32 ms VAD window) of the audio front end's hot paths.

use std::hint::black_box;

use confab_engine::audio::opus_egress::{FRAME_16K, OpusEgress};
use confab_engine::audio::opus_ingress::{FRAME_48K, OPUS_RATE, OpusIngress, RtpOpus};
use confab_engine::audio::resample::StreamResampler;
use confab_engine::core::endpoint::{EndpointConfig, EndpointInput, Endpointer};
use confab_engine::core::vad_gate::{VadGate, VadGateConfig};
use confab_engine::time::MediaTime;
use confab_models::mel::{FRAMES, LogMel, N_MELS, SAMPLES};
use confab_models::paths::SMART_TURN;
use confab_models::silero::{SileroState, SileroVad, WINDOW};
use confab_models::smart_turn::SmartTurn;
use confab_models::voice_encoder::{PARTIAL_SAMPLES, VoiceEncoder};
use criterion::{BatchSize, Criterion, criterion_group, criterion_main};

fn speechlike(n: usize, seed: f32) -> Vec<f32> {
    (0..n).map(|i| (i as f32 * 0.031 + seed).sin() * (i as f32 * 0.0007).sin() * 0.4).collect()
}

fn codec_and_resampling(c: &mut Criterion) {
    let mut encoder = opus::Encoder::new(OPUS_RATE, opus::Channels::Mono, opus::Application::Voip).unwrap();
    let pcm = speechlike(FRAME_48K, 0.0);
    let mut packet = vec![0u8; 4000];
    let n = encoder.encode_float(&pcm, &mut packet).unwrap();
    packet.truncate(n);
    let mut ingress = OpusIngress::new().unwrap();
    let mut sequence = 0u16;
    c.bench_function("opus_decode_and_resample_20ms_48k_to_16k", |b| {
        b.iter(|| {
            sequence = sequence.wrapping_add(1);
            let timestamp = u32::from(sequence).wrapping_mul(FRAME_48K as u32);
            black_box(ingress.receive(RtpOpus { sequence, timestamp, payload: black_box(&packet) }).unwrap().len())
        })
    });

    let mut resampler = StreamResampler::new(48_000, FRAME_48K).unwrap();
    c.bench_function("resample_20ms_48k_to_16k", |b| {
        b.iter(|| black_box(resampler.process(black_box(&pcm)).unwrap().len()))
    });

    // The noise suppressor's work per frame once on: 16 → 48 kHz, two RNNoise frames, 48 → 16 kHz.
    let mut denoiser = confab_engine::audio::denoise::Denoiser::new().unwrap();
    let noisy = speechlike(FRAME_16K, 0.25);
    c.bench_function("denoise_20ms_16k_rnnoise_at_48k", |b| {
        b.iter_batched_ref(|| noisy.clone(), |frame| denoiser.process(black_box(frame)).unwrap(), BatchSize::SmallInput)
    });

    let mut egress = OpusEgress::new().unwrap();
    let voice = speechlike(FRAME_16K, 0.5);
    c.bench_function("opus_egress_encode_20ms_16k_32kbps", |b| {
        b.iter(|| black_box(egress.encode(black_box(&voice)).unwrap().len()))
    });

    let mut encoder = opus::Encoder::new(OPUS_RATE, opus::Channels::Mono, opus::Application::Voip).unwrap();
    encoder.set_bitrate(opus::Bitrate::Bits(32_000)).unwrap();
    c.bench_function("opus_encode_20ms_48k_32kbps", |b| {
        b.iter(|| black_box(encoder.encode_float(black_box(&pcm), &mut packet.clone()).unwrap()))
    });
}

fn vad(c: &mut Criterion) {
    let dir = confab_models::default_models_dir();
    let window = speechlike(WINDOW, 1.0);
    let mut single = SileroVad::load(&dir, 1, 1).unwrap();
    let mut state = SileroState::default();
    let mut p = [0.0f32];
    c.bench_function("silero_vad_one_window", |b| {
        b.iter(|| single.infer(&[&window], &mut [&mut state], &mut p).unwrap())
    });

    for batch in [32usize, 128] {
        let mut batched = SileroVad::load(&dir, batch, 1).unwrap();
        let windows: Vec<Vec<f32>> = (0..batch).map(|i| speechlike(WINDOW, i as f32)).collect();
        let refs: Vec<&[f32]> = windows.iter().map(Vec::as_slice).collect();
        let mut states = vec![SileroState::default(); batch];
        let mut probabilities = vec![0.0f32; batch];
        c.bench_function(&format!("silero_vad_batch_of_{batch}_windows"), |b| {
            b.iter(|| {
                let mut state_refs: Vec<&mut SileroState> = states.iter_mut().collect();
                batched.infer(&refs, &mut state_refs, &mut probabilities).unwrap()
            })
        });
    }
}

fn turn_taking(c: &mut Criterion) {
    c.bench_function("vad_gate_and_endpointing_per_window", |b| {
        b.iter_batched(
            || (VadGate::new(VadGateConfig::default()), Endpointer::new(EndpointConfig::default()), 0u64),
            |(mut gate, mut endpoint, mut w)| {
                for i in 0..100u64 {
                    let p = if (i / 20) % 2 == 0 { 0.9 } else { 0.05 };
                    let (start, end) = (MediaTime(w * 512), MediaTime((w + 1) * 512));
                    gate.handle_window(start, end, p);
                    while let Some(out) = gate.poll_output() {
                        if let confab_engine::core::vad_gate::VadGateOutput::SpeechStarted { start, .. } = out {
                            endpoint.handle_input(EndpointInput::SpeechStarted { at: start });
                        }
                    }
                    endpoint.handle_timeout(end);
                    while endpoint.poll_output().is_some() {}
                    w += 1;
                }
                black_box(w)
            },
            BatchSize::SmallInput,
        )
    });

    let audio = speechlike(SAMPLES, 2.0);
    let mut mel = LogMel::new();
    let mut features = vec![0.0f32; N_MELS * FRAMES];
    c.bench_function("whisper_log_mel_8s", |b| b.iter(|| mel.compute(black_box(&audio), &mut features)));
    let models = confab_models::default_models_dir();
    let mut turn = SmartTurn::load(&models, 1).unwrap();
    c.bench_function("smart_turn_predict_8s", |b| b.iter(|| black_box(turn.predict(&audio).unwrap())));
    // The package's own graph, for comparison with the prepared one the engine runs.
    let mut original = SmartTurn::load_file(&models, SMART_TURN, 1).unwrap();
    c.bench_function("smart_turn_original_predict_8s", |b| b.iter(|| black_box(original.predict(&audio).unwrap())));
}

/// A voice check (`stt.other_voices: ignore`): 1.6 s voiceprinted, every 640 ms of sound per call.
fn voice_check(c: &mut Criterion) {
    let mut encoder = VoiceEncoder::load(&confab_models::default_models_dir()).expect("models are fetched");
    let audio = speechlike(PARTIAL_SAMPLES, 0.5);
    c.bench_function("voice_check_voiceprint_1_6s", |b| b.iter(|| black_box(encoder.embed_partial(black_box(&audio)))));
}

criterion_group!(benches, codec_and_resampling, vad, turn_taking, voice_check);
criterion_main!(benches);
