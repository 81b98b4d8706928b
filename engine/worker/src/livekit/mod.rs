//! LiveKit's client protocol, spoken by Confab for its own conversations: a 1:1 room per conversation
//! (the person's LiveKit client and the agent Confab runs; nothing is forwarded between outside
//! participants). `room` is what the client is told of the room and its two participants, `ids` makes
//! LiveKit's prefixed ids, `signal` encodes the signalling frames, `peers` the two peer connections of
//! the `/rtc` protocol, `data_channel` and `words` the agent's words as `lk.transcription` text streams,
//! `room_events` turns the engine's events into what the room shows, and `call` runs a call. The HTTP side
//! (`confab-http`'s `/rtc`) checks the access token and relays the WebSocket's frames.

pub mod call;
pub mod data_channel;
pub mod ids;
pub mod peers;
pub mod room;
pub mod room_events;
pub mod signal;
pub mod words;

pub use call::LiveKitCall;
pub use room::Room;
