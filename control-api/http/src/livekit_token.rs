//! LiveKit access tokens for Confab's own conversations (`POST /v1/auth/conversation`): HS256 JWTs in
//! LiveKit's claim shape (`iss` the API key, `sub` the participant's identity, `name`, `video` grants for one
//! room), so LiveKit's client SDKs carry them unchanged. One signing secret per deployment, generated on first
//! start and kept in the database (`settings`), so every replica of a fleet mints and checks the same tokens.
//! The room of a conversation is named by the conversation's id.

use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use serde::{Deserialize, Serialize};

/// Lifetime of an access token and of the session token that carries it, in seconds (10 minutes, as the
/// join page's session tokens): long enough to connect, not to be kept.
pub const ACCESS_TOKEN_TTL_SECONDS: i64 = 600;
/// The API key named in `iss` (LiveKit pairs each secret with a key name; a deployment has one).
pub const API_KEY: &str = "confab";

/// LiveKit's video grant (the fields a client reads).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct VideoGrant {
    pub room_join: bool,
    pub room: String,
    pub can_publish: bool,
    pub can_subscribe: bool,
    pub can_publish_data: bool,
}

/// The claims of a LiveKit access token.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct AccessClaims {
    pub iss: String,
    /// The participant's identity (the conversation's `user_id`).
    pub sub: String,
    pub name: String,
    pub nbf: i64,
    pub exp: i64,
    pub video: VideoGrant,
}

/// What `POST /v1/auth/conversation` answers in its `token` (a JWT the SDK decodes): where to connect and
/// the access token to connect with.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct SessionGrant {
    pub rtc_server_url: String,
    pub access_token: String,
    pub conversation_id: String,
    pub iat: i64,
    pub exp: i64,
}

#[derive(Clone)]
pub struct LiveKitKeys {
    encoding: EncodingKey,
    decoding: DecodingKey,
}

impl LiveKitKeys {
    pub fn new(secret: &str) -> LiveKitKeys {
        LiveKitKeys {
            encoding: EncodingKey::from_secret(secret.as_bytes()),
            decoding: DecodingKey::from_secret(secret.as_bytes()),
        }
    }

    /// An access token admitting `identity` (shown as `name`) to the room of `conversation_id`, valid from
    /// `now` (Unix seconds) for `ACCESS_TOKEN_TTL_SECONDS`.
    pub fn access_token(&self, conversation_id: &str, identity: &str, name: &str, now: i64) -> String {
        let claims = AccessClaims {
            iss: API_KEY.to_string(),
            sub: identity.to_string(),
            name: name.to_string(),
            nbf: now,
            exp: now + ACCESS_TOKEN_TTL_SECONDS,
            video: VideoGrant {
                room_join: true,
                room: conversation_id.to_string(),
                can_publish: true,
                can_subscribe: true,
                can_publish_data: true,
            },
        };
        self.sign(&claims)
    }

    /// The session token of `POST /v1/auth/conversation`: `rtc_server_url` and an access token, signed alike.
    pub fn session_grant(&self, rtc_server_url: &str, access_token: String, conversation_id: &str, now: i64) -> String {
        self.sign(&SessionGrant {
            rtc_server_url: rtc_server_url.to_string(),
            access_token,
            conversation_id: conversation_id.to_string(),
            iat: now,
            exp: now + ACCESS_TOKEN_TTL_SECONDS,
        })
    }

    /// The claims of a valid, unexpired access token of this deployment.
    pub fn verify(&self, token: &str) -> Result<AccessClaims, jsonwebtoken::errors::Error> {
        let mut validation = Validation::new(Algorithm::HS256);
        validation.set_issuer(&[API_KEY]);
        validation.leeway = 0;
        validation.validate_nbf = true;
        jsonwebtoken::decode::<AccessClaims>(token, &self.decoding, &validation).map(|data| data.claims)
    }

    fn sign<T: Serialize>(&self, claims: &T) -> String {
        jsonwebtoken::encode(&Header::new(Algorithm::HS256), claims, &self.encoding).expect("HS256 signing never fails")
    }
}

/// The WebSocket URL of LiveKit signalling on a server whose browsers reach it at `public_url`
/// (`http://…` becomes `ws://…`, `https://…` becomes `wss://…`).
pub fn rtc_server_url(public_url: &str) -> String {
    let base = public_url.trim_end_matches('/');
    match base.split_once("://") {
        Some(("https", rest)) => format!("wss://{rest}"),
        Some(("http", rest)) => format!("ws://{rest}"),
        _ => base.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn access_tokens_carry_livekit_claims_and_are_checked() {
        let keys = LiveKitKeys::new("secret");
        let now = chrono::Utc::now().timestamp();
        let token = keys.access_token("c-1", "u-1", "Ada", now);
        let claims = keys.verify(&token).unwrap();
        assert_eq!(claims.sub, "u-1");
        assert_eq!(claims.video.room, "c-1");
        assert!(claims.video.room_join);
        assert_eq!(claims.exp - claims.nbf, ACCESS_TOKEN_TTL_SECONDS);
        assert!(LiveKitKeys::new("other").verify(&token).is_err(), "another deployment's key refuses it");
        let expired = keys.access_token("c-1", "u-1", "Ada", now - 2 * ACCESS_TOKEN_TTL_SECONDS);
        assert!(keys.verify(&expired).is_err());
    }

    #[test]
    fn the_rtc_url_follows_the_public_url() {
        assert_eq!(rtc_server_url("http://127.0.0.1:8080/"), "ws://127.0.0.1:8080");
        assert_eq!(rtc_server_url("https://confab.example.com"), "wss://confab.example.com");
    }
}
