//! The Rust log-mel against the reference implementation Smart Turn ships with (pipecat's vendored
//! `compute_whisper_log_mel_features`, numpy): values computed once from that code on the same signal.

use confab_models::mel::{FRAMES, LogMel, N_MELS};

/// 3 s of a chirp plus a tone, float32, as the reference computed it.
fn signal() -> Vec<f32> {
    (0..3 * 16_000)
        .map(|i| {
            let t = i as f64 / 16_000.0;
            (0.3 * (2.0 * std::f64::consts::PI * (200.0 * t + 300.0 * t * t)).sin()
                + 0.1 * (2.0 * std::f64::consts::PI * 1234.5 * t).sin()) as f32
        })
        .collect()
}

#[test]
fn matches_the_reference_features() {
    let mut features = vec![0.0f32; N_MELS * FRAMES];
    LogMel::new().compute(&signal(), &mut features);
    let reference = [
        (0, 0, 1.501487374305725),
        (10, 5, 0.5004765391349792),
        (15, 50, 1.0848593711853027),
        (30, 120, 1.310907244682312),
        (26, 10, 0.015685783699154854),
        (45, 200, -0.22351670265197754),
    ];
    for (mel, frame, expected) in reference {
        let actual = features[mel * FRAMES + frame];
        assert!((actual - expected as f32).abs() < 1e-3, "[{mel}, {frame}]: {actual} vs {expected}");
    }
    let abs_sum: f64 = features.iter().map(|v| f64::from(v.abs())).sum();
    assert!((abs_sum - 17679.86).abs() < 2.0, "sum of |features| {abs_sum} vs 17679.86");
}
