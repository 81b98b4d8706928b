//! What the room shows of the engine's events, decided on the events alone (the same ones, on the same
//! clock, as the webhooks): the agent's `lk.agent.state` (`listening` → `thinking` when the person's turn
//! is committed → `speaking` → `listening`), who is speaking (`SpeakersChanged`), and the words
//! (`words::Transcript`s: the person's committed utterance; the agent's segment, interim when it starts
//! speaking and final with what was heard when it stops).

use confab_engine::events::EventKind;

use super::ids::{self, new_id};
use super::room::{LISTENING, SPEAKING, THINKING};
use super::words::Transcript;

/// One thing to tell the client.
#[derive(Debug, Clone, PartialEq)]
pub enum RoomSignal {
    AgentState(&'static str),
    Speakers { user: bool, agent: bool },
    AgentWords(Transcript),
    UserWords(Transcript),
}

/// The state the signals are decided on.
pub struct RoomEvents {
    agent_track: String,
    user_speaking: bool,
    agent_speaking: bool,
    /// The agent's segment being spoken.
    segment: Option<String>,
    /// The person's audio track (their words are attributed to it), once published.
    pub user_track: String,
}

impl RoomEvents {
    pub fn new(agent_audio_track: &str) -> RoomEvents {
        RoomEvents {
            agent_track: agent_audio_track.to_string(),
            user_speaking: false,
            agent_speaking: false,
            segment: None,
            user_track: String::new(),
        }
    }

    pub fn on_event(&mut self, event: &EventKind) -> Vec<RoomSignal> {
        match event {
            EventKind::UserStartedSpeaking => self.speakers(Some(true), None),
            EventKind::UserStoppedSpeaking => self.speakers(Some(false), None),
            EventKind::UtteranceCommitted { text } => vec![
                RoomSignal::UserWords(Transcript {
                    segment_id: new_id(ids::SEGMENT),
                    track_sid: self.user_track.clone(),
                    text: text.clone(),
                    is_final: true,
                }),
                RoomSignal::AgentState(THINKING),
            ],
            EventKind::AgentStartedSpeaking { text } => {
                let segment = new_id(ids::SEGMENT);
                self.segment = Some(segment.clone());
                let mut signals = vec![RoomSignal::AgentState(SPEAKING)];
                signals.extend(self.speakers(None, Some(true)));
                signals.push(RoomSignal::AgentWords(Transcript {
                    segment_id: segment,
                    track_sid: self.agent_track.clone(),
                    text: text.clone(),
                    is_final: false,
                }));
                signals
            }
            EventKind::AgentStoppedSpeaking { text } => {
                let segment = self.segment.take().unwrap_or_else(|| new_id(ids::SEGMENT));
                let mut signals = vec![RoomSignal::AgentWords(Transcript {
                    segment_id: segment,
                    track_sid: self.agent_track.clone(),
                    text: text.clone(),
                    is_final: true,
                })];
                signals.extend(self.speakers(None, Some(false)));
                signals.push(RoomSignal::AgentState(LISTENING));
                signals
            }
            _ => vec![],
        }
    }

    fn speakers(&mut self, user: Option<bool>, agent: Option<bool>) -> Vec<RoomSignal> {
        let (user, agent) = (user.unwrap_or(self.user_speaking), agent.unwrap_or(self.agent_speaking));
        if (user, agent) == (self.user_speaking, self.agent_speaking) {
            return vec![];
        }
        (self.user_speaking, self.agent_speaking) = (user, agent);
        vec![RoomSignal::Speakers { user, agent }]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(signals: &[RoomSignal]) -> Vec<(String, bool)> {
        signals
            .iter()
            .filter_map(|signal| match signal {
                RoomSignal::AgentWords(t) => Some((format!("agent: {}", t.text), t.is_final)),
                RoomSignal::UserWords(t) => Some((format!("user: {}", t.text), t.is_final)),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn a_turn_and_an_interrupted_answer_show_as_livekit_agents_show_them() {
        let mut room = RoomEvents::new("TR_agent");
        room.user_track = "TR_user".into();
        let script = [
            EventKind::UserStartedSpeaking,
            EventKind::UserStoppedSpeaking,
            EventKind::UtteranceCommitted { text: "What is the capital of France?".into() },
            EventKind::AgentStartedSpeaking { text: "The capital of France is Paris.".into() },
            EventKind::UserStartedSpeaking,
            EventKind::AgentInterrupted,
            EventKind::AgentStoppedSpeaking { text: "The capital".into() },
        ];
        let signals: Vec<Vec<RoomSignal>> = script.iter().map(|event| room.on_event(event)).collect();
        assert_eq!(signals[0], [RoomSignal::Speakers { user: true, agent: false }]);
        assert_eq!(signals[1], [RoomSignal::Speakers { user: false, agent: false }]);
        assert_eq!(words(&signals[2]), [("user: What is the capital of France?".to_string(), true)]);
        assert_eq!(signals[2][1], RoomSignal::AgentState(THINKING));
        assert_eq!(signals[3][0], RoomSignal::AgentState(SPEAKING));
        assert_eq!(signals[3][1], RoomSignal::Speakers { user: false, agent: true });
        assert_eq!(words(&signals[3]), [("agent: The capital of France is Paris.".to_string(), false)]);
        assert_eq!(signals[4], [RoomSignal::Speakers { user: true, agent: true }]);
        assert!(signals[5].is_empty());
        assert_eq!(words(&signals[6]), [("agent: The capital".to_string(), true)], "what was heard");
        assert_eq!(signals[6][1], RoomSignal::Speakers { user: true, agent: false });
        assert_eq!(signals[6][2], RoomSignal::AgentState(LISTENING));
        let segment = |s: &RoomSignal| match s {
            RoomSignal::AgentWords(t) => t.segment_id.clone(),
            _ => String::new(),
        };
        assert_eq!(segment(&signals[3][2]), segment(&signals[6][0]), "interim and final share the segment");
        let RoomSignal::UserWords(user) = &signals[2][0] else { panic!() };
        assert_eq!(user.track_sid, "TR_user");
    }
}
