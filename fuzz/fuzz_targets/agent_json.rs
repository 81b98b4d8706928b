//! The Agent JSON through to the engine's conversation: parse it, derive the turn-taking configuration,
//! and run a conversation on it for a few seconds of media time (speech, silence, the agent's reply
//! end), so extreme delays and durations are exercised, not only parsed.
#![no_main]

use confab_engine::agent_spec::AgentSpec;
use confab_engine::conversation::Conversation;
use confab_engine::time::MediaTime;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok(spec) = AgentSpec::from_json(text) else { return };
    let Ok(config) = spec.conversation_config() else { return };
    let mut conversation = Conversation::new(config);
    let mut frame = [0.0f32; 320];
    for window in 0..200u64 {
        let start = MediaTime::from_millis(window * 32);
        let end = MediaTime::from_millis((window + 1) * 32);
        // Speech for the first second, then silence.
        conversation.vad_window(start, end, if window < 31 { 0.95 } else { 0.02 });
        while let Some(deadline) = conversation.poll_timeout() {
            if deadline > end {
                break;
            }
            conversation.handle_timeout(deadline);
        }
        conversation.render(end, &mut frame);
        while conversation.poll_output().is_some() {}
    }
    conversation.end_call(MediaTime::from_millis(200 * 32));
    while conversation.poll_output().is_some() {}
});
