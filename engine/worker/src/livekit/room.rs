//! The room of one conversation as a LiveKit client sees it: the room itself (named by the conversation's
//! id), the person (identity and name from their access token) and the agent, a participant of kind AGENT
//! (identity `agent-<agent id>`, name the agent's `agent_name`) that publishes its voice (Opus,
//! microphone) and its face (VP8, camera, 512×512) and shows its state in the `lk.agent.state`
//! attribute, as LiveKit's own agents do. The JoinResponse that opens every signalling session is made
//! here.

use std::collections::HashMap;

use livekit_protocol as proto;

use super::ids::{self, new_id};

/// The LiveKit protocol version Confab speaks (the dual-PeerConnection `/rtc` signalling).
pub const PROTOCOL_VERSION: i32 = 17;
/// The server version announced to clients (they check features against it, not the product).
pub const SERVER_VERSION: &str = "1.9.0";
/// How often clients ping, and how long without a ping before either side gives up (seconds).
pub const PING_INTERVAL_SECONDS: i32 = 5;
pub const PING_TIMEOUT_SECONDS: i32 = 15;
/// The attribute LiveKit's agents keep their state in, and its values.
pub const AGENT_STATE: &str = "lk.agent.state";
pub const LISTENING: &str = "listening";
pub const THINKING: &str = "thinking";
pub const SPEAKING: &str = "speaking";
/// The agent's face, as the face pipeline encodes it.
pub const FACE_SIZE: u32 = 512;

/// One participant's ids and names.
#[derive(Debug, Clone)]
pub struct Member {
    pub sid: String,
    pub identity: String,
    pub name: String,
}

/// A track the agent publishes.
#[derive(Debug, Clone)]
pub struct AgentTrack {
    pub sid: String,
    pub kind: proto::TrackType,
}

/// Everything the signalling session says about the room.
#[derive(Debug, Clone)]
pub struct Room {
    pub sid: String,
    /// The conversation's id.
    pub name: String,
    pub created_at_ms: i64,
    pub user: Member,
    pub agent: Member,
    pub agent_audio: AgentTrack,
    pub agent_video: AgentTrack,
    /// The agent's state (`lk.agent.state`) and how often its `ParticipantInfo` changed.
    pub agent_state: &'static str,
    pub agent_version: u32,
}

impl Room {
    pub fn new(conversation_id: &str, user_identity: &str, user_name: &str, agent_id: &str, agent_name: &str) -> Room {
        Room {
            sid: new_id(ids::ROOM),
            name: conversation_id.to_string(),
            created_at_ms: chrono::Utc::now().timestamp_millis(),
            user: Member {
                sid: new_id(ids::PARTICIPANT),
                identity: user_identity.to_string(),
                name: user_name.to_string(),
            },
            agent: Member {
                sid: new_id(ids::PARTICIPANT),
                identity: format!("agent-{agent_id}"),
                name: agent_name.to_string(),
            },
            agent_audio: AgentTrack { sid: new_id(ids::TRACK), kind: proto::TrackType::Audio },
            agent_video: AgentTrack { sid: new_id(ids::TRACK), kind: proto::TrackType::Video },
            agent_state: LISTENING,
            agent_version: 1,
        }
    }

    /// The media stream both of the agent's tracks belong to (`<participant sid>|<stream>`, LiveKit's
    /// form), so that a client plays its voice and face in sync.
    pub fn agent_stream_id(&self) -> String {
        format!("{}|{}-av", self.agent.sid, self.agent.sid)
    }

    fn room_info(&self) -> proto::Room {
        proto::Room {
            sid: self.sid.clone(),
            name: self.name.clone(),
            max_participants: 2,
            creation_time: self.created_at_ms / 1000,
            creation_time_ms: self.created_at_ms,
            num_participants: 2,
            num_publishers: 1,
            ..Default::default()
        }
    }

    /// The person, as the JoinResponse tells them about themselves.
    pub fn user_info(&self) -> proto::ParticipantInfo {
        proto::ParticipantInfo {
            sid: self.user.sid.clone(),
            identity: self.user.identity.clone(),
            name: self.user.name.clone(),
            state: proto::participant_info::State::Joined as i32,
            joined_at: self.created_at_ms / 1000,
            joined_at_ms: self.created_at_ms,
            version: 1,
            permission: Some(proto::ParticipantPermission {
                can_subscribe: true,
                can_publish: true,
                can_publish_data: true,
                ..Default::default()
            }),
            kind: proto::participant_info::Kind::Standard as i32,
            ..Default::default()
        }
    }

    /// The agent with its two tracks and its state.
    pub fn agent_info(&self) -> proto::ParticipantInfo {
        let track = |track: &AgentTrack| {
            let video = track.kind == proto::TrackType::Video;
            proto::TrackInfo {
                sid: track.sid.clone(),
                r#type: track.kind as i32,
                name: if video { "agent-face" } else { "agent-voice" }.to_string(),
                width: if video { FACE_SIZE } else { 0 },
                height: if video { FACE_SIZE } else { 0 },
                source: if video { proto::TrackSource::Camera } else { proto::TrackSource::Microphone } as i32,
                mime_type: if video { "video/VP8" } else { "audio/opus" }.to_string(),
                stream: format!("{}-av", self.agent.sid),
                ..Default::default()
            }
        };
        proto::ParticipantInfo {
            sid: self.agent.sid.clone(),
            identity: self.agent.identity.clone(),
            name: self.agent.name.clone(),
            state: proto::participant_info::State::Active as i32,
            tracks: vec![track(&self.agent_audio), track(&self.agent_video)],
            joined_at: self.created_at_ms / 1000,
            joined_at_ms: self.created_at_ms,
            version: self.agent_version,
            permission: Some(proto::ParticipantPermission {
                can_subscribe: true,
                can_publish: true,
                can_publish_data: true,
                ..Default::default()
            }),
            is_publisher: true,
            kind: proto::participant_info::Kind::Agent as i32,
            attributes: HashMap::from([(AGENT_STATE.to_string(), self.agent_state.to_string())]),
            ..Default::default()
        }
    }

    /// Moves the agent to `state`: its next `ParticipantInfo` carries it, with a higher version. False
    /// when it already was in it.
    pub fn set_agent_state(&mut self, state: &'static str) -> bool {
        if self.agent_state == state {
            return false;
        }
        self.agent_state = state;
        self.agent_version += 1;
        true
    }

    /// The first message of every signalling session. Every field a client waits on is set: the server
    /// version and info, the person's permission, a ping interval and timeout; the subscriber connection
    /// is primary (Confab offers it at once, carrying the agent's tracks).
    pub fn join_response(&self, ice_servers: Vec<proto::IceServer>) -> proto::JoinResponse {
        proto::JoinResponse {
            room: Some(self.room_info()),
            participant: Some(self.user_info()),
            other_participants: vec![self.agent_info()],
            server_version: SERVER_VERSION.to_string(),
            ice_servers,
            subscriber_primary: true,
            ping_timeout: PING_TIMEOUT_SECONDS,
            ping_interval: PING_INTERVAL_SECONDS,
            server_info: Some(proto::ServerInfo {
                edition: proto::server_info::Edition::Standard as i32,
                version: SERVER_VERSION.to_string(),
                protocol: PROTOCOL_VERSION,
                node_id: "confab".to_string(),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    /// The `TrackInfo` a person's published track gets (`AddTrackRequest` → `TrackPublishedResponse`).
    pub fn published_track(request: &proto::AddTrackRequest) -> proto::TrackInfo {
        let audio = request.r#type == proto::TrackType::Audio as i32;
        proto::TrackInfo {
            sid: new_id(ids::TRACK),
            r#type: request.r#type,
            name: request.name.clone(),
            muted: request.muted,
            width: request.width,
            height: request.height,
            source: request.source,
            mime_type: if audio { "audio/opus".to_string() } else { String::new() },
            stream: request.stream.clone(),
            ..Default::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_join_response_has_what_clients_wait_for() {
        let room = Room::new("conv-1", "user-1", "Ada", "agent-id", "Tessa");
        let join = room.join_response(vec![]);
        assert!(join.ping_interval > 0 && join.ping_timeout > join.ping_interval);
        assert_eq!(join.server_info.as_ref().unwrap().protocol, PROTOCOL_VERSION);
        assert!(!join.server_version.is_empty());
        let me = join.participant.as_ref().unwrap();
        assert!(me.sid.starts_with("PA_") && me.permission.is_some());
        assert_eq!(me.identity, "user-1");
        assert_eq!(join.room.as_ref().unwrap().name, "conv-1");
        assert!(join.room.as_ref().unwrap().sid.starts_with("RM_"));
        let agent = &join.other_participants[0];
        assert_eq!(agent.kind, proto::participant_info::Kind::Agent as i32);
        assert_eq!((agent.identity.as_str(), agent.name.as_str()), ("agent-agent-id", "Tessa"));
        assert_eq!(agent.attributes[AGENT_STATE], LISTENING);
        assert_eq!(agent.tracks.len(), 2);
        assert!(agent.tracks.iter().all(|track| track.sid.starts_with("TR_")));
        let video = agent.tracks.iter().find(|t| t.r#type == proto::TrackType::Video as i32).unwrap();
        assert_eq!((video.width, video.height, video.source), (512, 512, proto::TrackSource::Camera as i32));
    }

    #[test]
    fn a_state_change_raises_the_version() {
        let mut room = Room::new("c", "u", "U", "a", "A");
        assert!(!room.set_agent_state(LISTENING));
        assert!(room.set_agent_state(THINKING));
        let info = room.agent_info();
        assert_eq!((info.attributes[AGENT_STATE].as_str(), info.version), (THINKING, 2));
    }

    #[test]
    fn both_agent_tracks_share_one_stream_of_the_agent() {
        let room = Room::new("c", "u", "U", "a", "A");
        let stream = room.agent_stream_id();
        let (participant, rest) = stream.split_once('|').unwrap();
        assert_eq!(participant, room.agent.sid);
        assert!(!rest.starts_with("TR"), "clients take the track id from the track, not the stream");
    }
}
