//! Session tokens: short-lived JWTs (HS256) bound to one conversation, for browsers and embedded clients
//! so the API key stays server-side. The signing key is a server secret shared through the database.

use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use serde::{Deserialize, Serialize};

/// Lifetime of a session token, in seconds (10 minutes).
pub const SESSION_TOKEN_TTL_SECONDS: i64 = 600;
const AUDIENCE: &str = "confab-session";

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SessionClaims {
    /// The one conversation this token admits.
    pub sub: String,
    pub aud: String,
    pub iat: i64,
    pub exp: i64,
    #[serde(rename = "userId")]
    pub user_id: String,
    #[serde(rename = "userName")]
    pub user_name: String,
    pub context: String,
}

#[derive(Clone)]
pub struct SessionKeys {
    encoding: EncodingKey,
    decoding: DecodingKey,
}

#[derive(Debug, thiserror::Error)]
pub enum SessionTokenError {
    #[error("invalid session token: {0}")]
    Invalid(#[from] jsonwebtoken::errors::Error),
    #[error("the session token is for another conversation")]
    WrongConversation,
}

impl SessionKeys {
    pub fn new(secret: &str) -> SessionKeys {
        SessionKeys {
            encoding: EncodingKey::from_secret(secret.as_bytes()),
            decoding: DecodingKey::from_secret(secret.as_bytes()),
        }
    }

    /// Mints a token for `conversation_id`, valid from `now` (Unix seconds) for the TTL.
    pub fn mint(
        &self,
        conversation_id: &str,
        user_id: &str,
        user_name: &str,
        context: &str,
        now: i64,
    ) -> (String, SessionClaims) {
        let claims = SessionClaims {
            sub: conversation_id.to_string(),
            aud: AUDIENCE.to_string(),
            iat: now,
            exp: now + SESSION_TOKEN_TTL_SECONDS,
            user_id: user_id.to_string(),
            user_name: user_name.to_string(),
            context: context.to_string(),
        };
        let token = jsonwebtoken::encode(&Header::new(Algorithm::HS256), &claims, &self.encoding)
            .expect("HS256 encoding of plain claims cannot fail");
        (token, claims)
    }

    /// Verifies signature, audience and expiry (no leeway), and that the token is for `conversation_id`.
    pub fn verify(&self, token: &str, conversation_id: &str) -> Result<SessionClaims, SessionTokenError> {
        let mut validation = Validation::new(Algorithm::HS256);
        validation.set_audience(&[AUDIENCE]);
        validation.leeway = 0;
        validation.set_required_spec_claims(&["exp", "aud", "sub"]);
        let claims = jsonwebtoken::decode::<SessionClaims>(token, &self.decoding, &validation)?.claims;
        if claims.sub != conversation_id {
            return Err(SessionTokenError::WrongConversation);
        }
        Ok(claims)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> i64 {
        chrono::Utc::now().timestamp()
    }

    #[test]
    fn a_fresh_token_verifies_for_its_conversation_only() {
        let keys = SessionKeys::new("secret-one");
        let (token, claims) = keys.mint("c1", "u1", "Ada", "ctx", now());
        assert_eq!(keys.verify(&token, "c1").unwrap(), claims);
        assert!(matches!(keys.verify(&token, "c2"), Err(SessionTokenError::WrongConversation)));
    }

    #[test]
    fn expired_tampered_and_foreign_tokens_are_refused() {
        let keys = SessionKeys::new("secret-one");
        let (expired, _) = keys.mint("c1", "u1", "Ada", "", now() - SESSION_TOKEN_TTL_SECONDS - 5);
        assert!(keys.verify(&expired, "c1").is_err());

        let (token, _) = keys.mint("c1", "u1", "Ada", "", now());
        let mut tampered = token.clone().into_bytes();
        let middle = token.find('.').unwrap() + 3;
        tampered[middle] = if tampered[middle] == b'A' { b'B' } else { b'A' };
        assert!(keys.verify(std::str::from_utf8(&tampered).unwrap(), "c1").is_err());

        let other = SessionKeys::new("secret-two");
        assert!(other.verify(&token, "c1").is_err());
        assert!(keys.verify("", "c1").is_err());
    }
}
