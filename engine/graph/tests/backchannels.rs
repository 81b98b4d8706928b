//! Speech over a talking agent, on the stepped runtime (media time, exact): what listeners say to show
//! they are listening ("yeah, right", "okay, okay", "I see") leaves the agent talking, with no user turn
//! and no word lost; "wait, stop" interrupts it when its first transcript is heard; thirty interruptions
//! (each after a backchannel) in one call leave it answering. The user is espeak-ng, heard by the local
//! models (Silero, Smart Turn, Moonshine), in a call of `common::stepped_call` (the same long answer to
//! every question, from a local OpenAI-compatible server; the voice espeak-ng). (espeak-ng's
//! "mm hmm" is no hum: it says letters, which Moonshine hears as "M. M. V." now and then.)

mod common;

use std::collections::VecDeque;

use common::speak;
use common::stepped_call::{Call, count, said, silence, the_whole_answer};
use confab_engine::EventKind;
use confab_engine::conversation::ConversationConfig;
use confab_engine::core::endpoint::EndpointConfig;
use confab_engine::time::MediaTime;

/// The agent's default turn-taking (backchannels ignored), its turns committed 500 ms after speech whatever
/// the turn model says (its verdicts near its threshold differ between CPUs).
fn turn_taking() -> ConversationConfig {
    ConversationConfig {
        endpoint: EndpointConfig { min_delay: MediaTime::from_millis(500), max_delay: MediaTime::from_millis(500) },
        ..ConversationConfig::default()
    }
}

/// The question, then — 1.5 s into the answer, and 2 s apart — "yeah, right", "okay, okay" and "I see":
/// the agent says its whole answer, the question is the only user turn, and the answer's turn metrics
/// name three backchannels.
#[test]
fn backchannels_over_a_long_answer_leave_the_agent_talking() {
    let mut call = Call::start(turn_taking());
    let question: VecDeque<f32> = silence(500).into_iter().chain(speak("Tell me about Vienna.")).collect();
    let heard = call.run(question, 3_000, |event, script| {
        match event.kind.name() {
            "agent.started_speaking" => {
                *script = [silence(1_500), speak("yeah, right"), silence(2_000), speak("okay, okay")]
                    .into_iter()
                    .chain([silence(2_000), speak("I see.")])
                    .flatten()
                    .collect();
            }
            "agent.stopped_speaking" => return false,
            _ => {}
        }
        true
    });
    let timeline: Vec<(u128, &str)> = heard.events.iter().map(|e| (e.media_time.as_millis(), e.kind.name())).collect();
    assert_eq!(count(&heard.events, "agent.interrupted"), 0, "{timeline:?} {:?}", heard.turns);
    assert_eq!(count(&heard.events, "user.started_speaking"), 1, "{timeline:?}");
    assert_eq!(count(&heard.events, "utterance_committed"), 1, "{timeline:?}");
    assert_eq!(said(&heard.events), [the_whole_answer()]);
    let overlaps: Vec<(&str, bool)> =
        heard.turns.iter().flat_map(|t| t.overlaps.iter().map(|o| (o.reason, o.interrupted))).collect();
    assert_eq!(overlaps, [("backchannel", false); 3], "{:?}", heard.turns);
}

/// "Wait, stop." 1 s into the answer: the agent is interrupted when the first transcript of it (500 ms
/// in) is heard, the answer is cut to what was played, and the words are the user's next turn.
#[test]
fn a_real_interruption_still_interrupts() {
    let mut call = Call::start(turn_taking());
    let question: VecDeque<f32> = silence(500).into_iter().chain(speak("Tell me about Vienna.")).collect();
    let mut interrupted = false;
    let heard = call.run(question, 3_000, |event, script| {
        match event.kind.name() {
            "agent.started_speaking" if !interrupted => {
                interrupted = true;
                *script = silence(1_000).into_iter().chain(speak("Wait, stop. What time is it?")).collect();
            }
            "utterance_committed" if interrupted => return false,
            _ => {}
        }
        true
    });
    let timeline: Vec<(u128, &str)> = heard.events.iter().map(|e| (e.media_time.as_millis(), e.kind.name())).collect();
    let at = |name: &str, nth: usize| {
        heard.events.iter().filter(|e| e.kind.name() == name).nth(nth).map(|e| e.media_time.as_millis()).unwrap()
    };
    let started = at("user.started_speaking", 1);
    assert!(
        (500..=560).contains(&(at("agent.interrupted", 0) - started)),
        "interrupted when the first transcript was heard: {timeline:?}"
    );
    let cut = &said(&heard.events)[0];
    assert!(the_whole_answer().starts_with(cut.as_str()) && cut.len() < 40, "{cut}");
    let overlaps: Vec<_> = heard.turns.iter().flat_map(|t| t.overlaps.iter()).collect();
    assert_eq!(overlaps.len(), 1, "{:?}", heard.turns);
    assert_eq!((overlaps[0].reason, overlaps[0].interrupted), ("words", true));
    let committed = heard.events.iter().rev().find_map(|e| match &e.kind {
        EventKind::UtteranceCommitted { text } => Some(text.to_lowercase()),
        _ => None,
    });
    assert!(committed.as_deref().is_some_and(|text| text.contains("stop")), "{committed:?}");
}

/// Thirty times in one call: 300 ms into each answer "yeah, right", then "wait, tell me more": the agent
/// talks on through the first and is interrupted by the second, which it answers. After the thirtieth,
/// the answer plays to its end: every interruption was one, every turn was answered in order, and the
/// voice still speaks.
#[test]
fn thirty_interruptions_leave_the_call_healthy() {
    const TIMES: usize = 30;
    let mut call = Call::start(turn_taking());
    let question: VecDeque<f32> = silence(500).into_iter().chain(speak("Tell me about Vienna.")).collect();
    let (backchannel, interruption) = (speak("yeah, right"), speak("Wait, tell me more."));
    let mut answers = 0;
    let heard = call.run(question, 60_000, |event, script| {
        match event.kind.name() {
            "agent.started_speaking" => {
                answers += 1;
                if answers <= TIMES {
                    *script = [silence(300), backchannel.clone(), silence(1_000), interruption.clone()]
                        .into_iter()
                        .flatten()
                        .collect();
                }
            }
            "agent.stopped_speaking" if answers > TIMES => return false,
            _ => {}
        }
        true
    });
    let timeline: Vec<(u128, &str)> = heard.events.iter().map(|e| (e.media_time.as_millis(), e.kind.name())).collect();
    assert_eq!(count(&heard.events, "agent.interrupted"), TIMES, "{timeline:?}");
    assert_eq!(count(&heard.events, "utterance_committed"), TIMES + 1);
    assert_eq!(count(&heard.events, "agent.started_speaking"), TIMES + 1);
    assert_eq!(said(&heard.events).last(), Some(&the_whole_answer()));
    // Each answer's stages come out once, in turn order; each names its backchannel and its interruption
    // (a backchannel may be judged as two: "yeah" and "right" heard apart when the pause between them
    // outlasts the user's last loud syllable, `core::other_voices`).
    let turns: Vec<u64> = heard.turns.iter().map(|t| t.turn.0).collect();
    assert_eq!(turns, (1..=TIMES as u64 + 1).collect::<Vec<_>>());
    let mut backchannels = 0;
    for turn in &heard.turns[..TIMES] {
        let reasons: Vec<&str> = turn.overlaps.iter().map(|o| o.reason).collect();
        let (last, before) = reasons.split_last().expect("an interruption");
        assert!(
            *last == "words" && !before.is_empty() && before.iter().all(|r| *r == "backchannel"),
            "turn {}: {reasons:?}",
            turn.turn.0
        );
        backchannels += before.len() as u64;
    }
    // The transcript is in order: each answer follows its question, and stops before the next is asked.
    let transcript: Vec<&str> = heard
        .events
        .iter()
        .map(|e| e.kind.name())
        .filter(|name| ["utterance_committed", "agent.started_speaking", "agent.stopped_speaking"].contains(name))
        .collect();
    let one_turn = ["utterance_committed", "agent.started_speaking", "agent.stopped_speaking"];
    assert_eq!(transcript, one_turn.repeat(TIMES + 1), "{timeline:?}");
    // `/metrics` counts them (`confab_backchannels_ignored_total`, `confab_interruptions_total`).
    let counted = |counter: &std::sync::atomic::AtomicU64| counter.load(std::sync::atomic::Ordering::Relaxed);
    let counters = &call.runtime.counters;
    assert_eq!(
        (counted(&counters.backchannels_ignored), counted(&counters.overlaps_interrupted)),
        (backchannels, TIMES as u64)
    );
    // The last answer was heard: its voice is not silence.
    let last_second = &heard.agent_audio[heard.agent_audio.len().saturating_sub(48_000)..];
    assert!(last_second.iter().any(|s| s.abs() > 0.05), "the last answer is heard");
}
