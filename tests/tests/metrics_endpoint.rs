//! `GET /metrics` on the real `confab serve`: Prometheus text with the documented series, behind the API
//! key on the main listener, without it on `--metrics-addr`; requests are counted by route template. Also:
//! the default local models are preloaded at start.

use confab_tests::server::{Server, create_key, wait_for_preload};

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// The value of the sample line that starts with `series` (name and labels, exactly as exposed).
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines().find_map(|line| line.strip_prefix(series)?.trim().parse().ok())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_are_served_with_the_key_or_on_their_own_listener() {
    let data = std::env::temp_dir().join(format!("confab-metrics-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&data);
    std::fs::create_dir_all(&data).unwrap();
    let key = create_key(&data);
    let metrics_port = free_port();
    let metrics_addr = format!("127.0.0.1:{metrics_port}");
    let server = Server::start(&data, &["--metrics-addr", &metrics_addr, "--max-calls", "2"]).await;
    let client = reqwest::Client::new();

    let refused = client.get(format!("{}/metrics", server.base)).send().await.unwrap();
    assert_eq!(refused.status(), 401, "the main listener wants the API key");
    for _ in 0..2 {
        let listed = client.get(format!("{}/v1/ext/agent", server.base)).header("x-api-key", &key).send().await;
        assert_eq!(listed.unwrap().status(), 200);
    }
    let unknown = client.get(format!("{}/no/such/path/42", server.base)).send().await.unwrap();
    assert_eq!(unknown.status(), 404);

    let response = client.get(format!("{}/metrics", server.base)).header("x-api-key", &key).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let content_type = response.headers()["content-type"].to_str().unwrap().to_string();
    assert!(content_type.starts_with("text/plain; version=0.0.4"), "{content_type}");
    let text = response.text().await.unwrap();
    let agents = r#"confab_http_requests_total{method="GET",route="/v1/ext/agent",status="200"}"#;
    assert_eq!(sample(&text, agents), Some(2.0), "{text}");
    let unmatched = r#"confab_http_requests_total{method="GET",route="unmatched",status="404"}"#;
    assert_eq!(sample(&text, unmatched), Some(1.0), "arbitrary paths share one series: {text}");
    assert_eq!(sample(&text, r#"confab_http_requests_total{method="GET",route="/metrics",status="401"}"#), Some(1.0));
    assert!(text.contains(r#"confab_http_request_duration_seconds_count{method="GET",route="/v1/ext/agent"} 2"#));
    assert_eq!(sample(&text, "confab_sessions_active"), Some(0.0));
    assert_eq!(sample(&text, "confab_sessions_max"), Some(2.0), "the media worker runs with --max-calls 2");
    assert_eq!(sample(&text, "confab_llm_requests_waiting"), Some(0.0));
    assert!(sample(&text, "confab_llm_threads").is_some(), "{text}");
    assert!(text.contains("# TYPE confab_turn_wait_seconds histogram"), "{text}");
    assert_eq!(sample(&text, "confab_turn_wait_seconds_count"), Some(0.0), "no call has paused yet");
    assert_eq!(sample(&text, r#"confab_turn_wait_seconds_bucket{le="0.2"}"#), Some(0.0));
    for series in [
        "confab_media_ticks_total",
        "confab_media_tick_overruns_total",
        "confab_media_input_underruns_total",
        "confab_media_input_late_ticks_total",
        "confab_media_input_frames_caught_up_total",
        "confab_media_input_overflows_total",
        "confab_media_ticks_skipped_total",
        "confab_face_frames_held_total",
        "confab_llm_early_replies_deferred_total",
        "confab_vad_windows_refused_total",
        "confab_turn_requests_dropped_total",
        "confab_turn_requests_stale_total",
        "confab_turn_requests_superseded_total",
        "confab_turn_verdicts_total",
        "confab_agent_jobs_dropped_total",
        "confab_backchannels_ignored_total",
        "confab_interruptions_total",
        "confab_noise_suppressed_calls_total",
        "confab_voice_checks_total",
        "confab_voice_checks_dropped_total",
        "confab_engine_panics_total",
        "confab_llm_requests_refused_total",
        "confab_llm_requests_abandoned_total",
    ] {
        assert!(sample(&text, series).is_some(), "{series} missing: {text}");
        assert!(text.contains(&format!("# TYPE {series} counter")), "{series}");
    }

    let open = client.get(format!("http://{metrics_addr}/metrics")).send().await.unwrap();
    assert_eq!(open.status(), 200, "--metrics-addr serves without the key");
    let open = open.text().await.unwrap();
    assert!(sample(&open, agents).is_some_and(|n| n >= 2.0), "{open}");
    let elsewhere = client.get(format!("http://{metrics_addr}/v1/ext/agent")).send().await.unwrap();
    assert_eq!(elsewhere.status(), 404, "the metrics listener serves nothing else");

    // The default local models load in the background at start (a call need not load them itself).
    let preloaded = wait_for_preload(&data).await;
    assert!(preloaded.contains("failed=0"), "the preload failed: {preloaded:?}");
    drop(server);
    let _ = std::fs::remove_dir_all(&data);
}
