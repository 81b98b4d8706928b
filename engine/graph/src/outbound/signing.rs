//! Standard Webhooks signatures: `webhook-id`, `webhook-timestamp` (Unix seconds) and
//! `webhook-signature: v1,<base64 HMAC-SHA256 of "id.timestamp.body">`, keyed with the agent's secret
//! (`whsec_` + base64 key bytes).

use base64::Engine;
use hmac::{Hmac, Mac};
use sha2::Sha256;

/// How far a timestamp may be from now when verifying (5 minutes).
pub const TOLERANCE_SECONDS: i64 = 300;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SignatureError {
    #[error("the secret is not whsec_ followed by base64")]
    BadSecret,
    #[error("no valid v1 signature matches")]
    NoMatch,
    #[error("the timestamp is outside the tolerance")]
    Timestamp,
}

fn key(secret: &str) -> Result<Vec<u8>, SignatureError> {
    let encoded = secret.strip_prefix("whsec_").unwrap_or(secret);
    base64::engine::general_purpose::STANDARD.decode(encoded).map_err(|_| SignatureError::BadSecret)
}

fn mac(key: &[u8], id: &str, timestamp: i64, body: &[u8]) -> Hmac<Sha256> {
    let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes keys of any length");
    mac.update(id.as_bytes());
    mac.update(b".");
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    mac
}

/// The `webhook-signature` header value.
pub fn sign(secret: &str, id: &str, timestamp: i64, body: &[u8]) -> Result<String, SignatureError> {
    let tag = mac(&key(secret)?, id, timestamp, body).finalize().into_bytes();
    Ok(format!("v1,{}", base64::engine::general_purpose::STANDARD.encode(tag)))
}

/// Checks a delivery as a receiver should: the timestamp within the tolerance of `now`, and one of the
/// space-separated `v1,…` signatures matching (compared in constant time).
pub fn verify(
    secret: &str,
    id: &str,
    timestamp: i64,
    signature_header: &str,
    body: &[u8],
    now: i64,
) -> Result<(), SignatureError> {
    if (now - timestamp).abs() > TOLERANCE_SECONDS {
        return Err(SignatureError::Timestamp);
    }
    let key = key(secret)?;
    for candidate in signature_header.split_whitespace() {
        let Some(encoded) = candidate.strip_prefix("v1,") else { continue };
        let Ok(tag) = base64::engine::general_purpose::STANDARD.decode(encoded) else { continue };
        if !tag.is_empty() && mac(&key, id, timestamp, body).verify_slice(&tag).is_ok() {
            return Ok(());
        }
    }
    Err(SignatureError::NoMatch)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

    #[test]
    fn matches_the_standard_webhooks_reference_vector() {
        // From the Standard Webhooks specification's examples.
        let body = br#"{"test": 2432232314}"#;
        let signature = sign(SECRET, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, body).unwrap();
        assert_eq!(signature, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
    }

    #[test]
    fn refuses_truncated_empty_wrong_tampered_and_stale_signatures() {
        let body = br#"{"event":{"name":"call_ended"}}"#;
        let now = 1_700_000_000;
        let good = sign(SECRET, "id1", now, body).unwrap();
        assert_eq!(verify(SECRET, "id1", now, &good, body, now), Ok(()));
        assert_eq!(verify(SECRET, "id1", now, &format!("v1,bogus {good}"), body, now + 10), Ok(()));
        assert_eq!(verify(SECRET, "id1", now, "v1,", body, now), Err(SignatureError::NoMatch));
        assert_eq!(verify(SECRET, "id1", now, &good[..good.len() - 4], body, now), Err(SignatureError::NoMatch));
        assert_eq!(verify("whsec_c2VjcmV0", "id1", now, &good, body, now), Err(SignatureError::NoMatch));
        assert_eq!(
            verify(SECRET, "id1", now, &good, br#"{"event":{"name":"call_ended!"}}"#, now),
            Err(SignatureError::NoMatch)
        );
        assert_eq!(verify(SECRET, "id2", now, &good, body, now), Err(SignatureError::NoMatch));
        assert_eq!(
            verify(SECRET, "id1", now, &good, body, now + TOLERANCE_SECONDS + 1),
            Err(SignatureError::Timestamp)
        );
    }
}
