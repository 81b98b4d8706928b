//! `confab simulate` as a user runs it: a spoken WAV in, JSON event lines out (and one `turn_metrics`
//! line per turn), transcript.json and agent.wav and avatar.webm (the face speaking, VP8 + Opus, checked
//! with ffprobe) written; bad inputs give a clear error and a non-zero exit.

use std::path::PathBuf;
use std::process::Command;

use confab_tests::{agent_audio, confab_bin, ffprobe_streams, rms_between, simulate, simulate_lines};
use serde_json::Value;

fn workdir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("confab-sim-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn agent_file(dir: &std::path::Path) -> PathBuf {
    let path = dir.join("agent.json");
    std::fs::write(
        &path,
        r#"{"agent_name":"Sim","agent_system_prompt":"Be brief.","avatars":[{"avatar_key_id":"stock-amara","config":{"stt":{"min_endpointing_delay":0.4,"max_endpointing_delay":2.0}}}],"config":{"maxCallDuration":600}}"#,
    )
    .unwrap();
    path
}

#[test]
fn simulate_prints_event_lines_and_writes_files() {
    let dir = workdir("ok");
    let input = dir.join("user.wav");
    let status = Command::new("espeak-ng")
        .args(["-v", "en-us", "-s", "160", "-w"])
        .arg(&input)
        .arg("Good morning, could you tell me when the library opens?")
        .status()
        .expect("espeak-ng is installed");
    assert!(status.success());
    let out = dir.join("out");
    let lines = simulate(&agent_file(&dir), &input, &out, &[]);
    let names: Vec<&str> = lines.iter().map(|l| l["event"]["name"].as_str().unwrap()).collect();
    assert_eq!(names.first(), Some(&"user.started_speaking"), "{names:?}");
    assert!(names.contains(&"user.stopped_speaking"));
    assert!(names.contains(&"utterance_committed"));
    assert_eq!(names.last(), Some(&"call_ended"));
    let mut previous = 0.0;
    for line in &lines {
        assert_eq!(line["type"], "pipeline");
        assert!(line["conversation_id"].is_string());
        assert!(line["timestamp"].as_f64().unwrap() > 1.6e9);
        assert!(line["event"]["payload"].is_object());
        let media_time = line["media_time"].as_f64().unwrap();
        assert!(media_time >= previous, "media time never goes back: {lines:?}");
        previous = media_time;
    }
    let transcript: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("transcript.json")).unwrap()).unwrap();
    assert_eq!(transcript[0]["role"], "user");
    for field in ["timestamp", "content", "conversation_id"] {
        assert!(transcript[0][field].is_string(), "{field}");
    }
    assert!(transcript[0]["message_timestamp"].is_number());
    let agent = hound::WavReader::open(out.join("agent.wav")).unwrap();
    assert_eq!((agent.spec().sample_rate, agent.spec().channels, agent.spec().bits_per_sample), (16_000, 1, 16));
    // The face speaking the conversation: VP8 at 25 fps and Opus, one frame per 40 ms of agent audio.
    let frames = (agent.duration() as usize).div_ceil(640);
    let streams = ffprobe_streams(&out.join("avatar.webm"));
    assert_eq!(streams.len(), 2, "{streams:?}");
    let (video, audio) = (&streams[0], &streams[1]);
    assert_eq!(
        (video["codec_name"].as_str(), video["width"].as_u64(), video["height"].as_u64()),
        (Some("vp8"), Some(512), Some(512))
    );
    assert_eq!(audio["codec_name"], "opus");
    assert_eq!(video["nb_read_packets"], frames.to_string(), "{video}");
    assert_eq!(audio["nb_read_packets"], (2 * frames).to_string(), "{audio}");
    let decoded = Command::new("ffmpeg")
        .args(["-v", "error", "-i"])
        .arg(out.join("avatar.webm"))
        .args(["-f", "null", "-"])
        .output()
        .expect("ffmpeg is installed (scripts/setup.sh)");
    assert!(decoded.status.success() && decoded.stderr.is_empty(), "{}", String::from_utf8_lossy(&decoded.stderr));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn simulate_refuses_bad_input_clearly() {
    let dir = workdir("bad");
    let agent = agent_file(&dir);
    let not_wav = dir.join("notes.wav");
    std::fs::write(&not_wav, "definitely not audio").unwrap();
    let bad_agent = dir.join("bad.json");
    std::fs::write(&bad_agent, "{ nope").unwrap();
    for (agent, input, expected) in [
        (&agent, &not_wav, "cannot read the WAV file"),
        (&agent, &dir.join("missing.wav"), "cannot read the WAV file"),
        (&bad_agent, &not_wav, "not valid JSON"),
    ] {
        let output = Command::new(confab_bin())
            .args(["simulate", "--agent"])
            .arg(agent)
            .arg("--input")
            .arg(input)
            .output()
            .unwrap();
        assert!(!output.status.success());
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(expected), "{stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The whole conversation offline on the embedded default models: Silero VAD and Smart Turn, Moonshine Base,
/// Qwen2.5-Coder-0.5B-Instruct and the Piper voice.
#[test]
fn offline_conversation_on_local_models() {
    let dir = workdir("offline");
    let input = dir.join("question.wav");
    let question = "What is the capital of France?";
    assert!(
        Command::new("espeak-ng")
            .args(["-v", "en-us", "-s", "160", "-w"])
            .arg(&input)
            .arg(question)
            .status()
            .unwrap()
            .success()
    );
    let agent = dir.join("local.json");
    std::fs::write(
        &agent,
        r#"{"agent_name":"Local","agent_system_prompt":"You are a helpful assistant. Answer in one short sentence.","avatars":[{"avatar_key_id":"stock-amara","config":{"llm":{"provider":"local"},"stt":{"provider":"local","max_endpointing_delay":1.0},"tts":{"provider":"local"}}}]}"#,
    )
    .unwrap();
    let out = dir.join("out");
    let lines = simulate_lines(&agent, &input, &out, &[]);
    assert_eq!(lines.last().unwrap()["event"]["name"], "call_ended", "call_ended is the last line");
    let events: Vec<Value> = lines.iter().filter(|line| line["type"] == "pipeline").cloned().collect();
    let find = |name: &str| {
        events.iter().find(|e| e["event"]["name"] == name).unwrap_or_else(|| panic!("no {name}: {events:#?}"))
    };
    let heard = find("utterance_committed")["event"]["payload"]["text"].as_str().unwrap().to_lowercase();
    for word in ["capital", "france"] {
        assert!(heard.contains(word), "{heard:?}");
    }
    let reply = find("agent.started_speaking")["event"]["payload"]["text"].as_str().unwrap().to_string();
    assert!(!reply.trim().is_empty());
    assert_eq!(find("agent.stopped_speaking")["event"]["payload"]["text"], reply.as_str());
    assert_eq!(events.last().unwrap()["event"]["name"], "call_ended");
    let start = find("agent.started_speaking")["media_time"].as_f64().unwrap();
    let stop = find("agent.stopped_speaking")["media_time"].as_f64().unwrap();
    let rms = rms_between(&agent_audio(&out), start, stop);
    assert!(rms > 0.02, "audible agent: RMS {rms}");
    let transcript: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("transcript.json")).unwrap()).unwrap();
    let roles: Vec<&str> = transcript.as_array().unwrap().iter().map(|e| e["role"].as_str().unwrap()).collect();
    assert_eq!(roles, ["user", "assistant"]);
    // One turn, one `turn_metrics` line: every stage present, in order, on the same clock as the events.
    let metrics: Vec<&Value> = lines.iter().filter(|line| line["type"] == "turn_metrics").collect();
    assert_eq!(metrics.len(), 1, "{lines:#?}");
    let (metrics, stages) = (metrics[0], &metrics[0]["media_time"]);
    assert_eq!(metrics["turn"], 1);
    assert_eq!(metrics["conversation_id"], events[0]["conversation_id"]);
    // Every stage but `interrupted`, in the order they happen.
    let answered = &confab_engine::turn_metrics::STAGES[..8];
    let times: Vec<f64> = answered.iter().map(|stage| stages[stage].as_f64().expect(stage)).collect();
    assert!(times.windows(2).all(|pair| pair[0] <= pair[1]), "{stages}");
    assert_eq!(stages["first_audio_played"].as_f64(), Some(start));
    assert_eq!(stages["transcript_final"], find("utterance_committed")["media_time"]);
    assert!(stages.get("interrupted").is_none(), "{stages}");
    let latency = &metrics["latency_ms"];
    for stage in ["stt", "llm_first_token", "first_clause", "tts_first_audio", "first_segment"] {
        assert!(latency[stage].as_f64().is_some_and(|ms| ms > 0.0), "{stage}: {latency}");
    }
    let commit_to_audio = 1_000.0 * (start - stages["committed"].as_f64().unwrap());
    assert!((latency["commit_to_first_audio"].as_f64().unwrap() - commit_to_audio).abs() < 0.01, "{metrics}");
    let _ = std::fs::remove_dir_all(&dir);
}
