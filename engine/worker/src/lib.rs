//! What runs in a media worker: `confab worker` in a fleet, and embedded in `confab serve` alone.
//! `media_worker` holds the engine's runtime and the calls in progress, above the two transports: `media`,
//! WebRTC (peer negotiation, call supervision, recorder, the face's video), and `livekit`, LiveKit's client
//! protocol built on it; `session_binding` binds a conversation (a `SessionSpec`) to an engine session, `fleet` takes calls from the
//! fleet's queue, `placer` places calls for the HTTP side of `confab serve` alone
//! (`confab_calls::CallPlacer`), `call_session` is what a transport runs a call on. A worker reads and
//! writes its calls' records only through the `confab_calls::CallRecords` port the binary gives it (the
//! store's, on the database): it depends on no database and serves no HTTP.

pub mod call_session;
pub mod fleet;
pub mod livekit;
pub mod media;
pub mod media_worker;
pub mod placer;
pub mod session_binding;

/// The process's log filter unless `RUST_LOG` says otherwise (`confab` main). The WebRTC stack (`rtc*`,
/// `webrtc`) warns once per media tick while a connection is not up ("SrtpHandler.handle_write got error:
/// local_srtp_context is not set yet" every ~10 ms): only its errors are kept, and a call that never
/// connects is told once (`media::connection_watch`).
pub const DEFAULT_LOG_FILTER: &str = "info,sqlx=warn,rtc=error,webrtc=error";
