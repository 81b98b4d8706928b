//! Console sessions: after signing in (a one-time link, or an API key pasted once), the browser holds an
//! HttpOnly, SameSite=Strict cookie carrying a signed token (HS256, audience `confab-console`, 12 hours);
//! the API key itself never reaches the page. A request is admitted on the cookie only when it is the
//! console's own: it carries the `X-Confab-Console` header (which no cross-site form, link or image can
//! send, and which a cross-site `fetch` could send only after a CORS preflight that Confab never approves)
//! and no `Origin` or `Sec-Fetch-Site` that names another site.

use axum::http::HeaderMap;
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use serde::{Deserialize, Serialize};

use confab_store::error::ApiError;

/// The cookie's name.
pub const COOKIE: &str = "confab_console";
/// The header the console's requests carry.
pub const HEADER: &str = "x-confab-console";
/// How long a console session lasts, in seconds.
pub const SESSION_TTL_SECONDS: i64 = 12 * 3600;
const AUDIENCE: &str = "confab-console";
/// What a cookie-holding request from another site is told.
pub const CROSS_SITE: &str = "Forbidden: the console's session is not accepted from another site";

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ConsoleClaims {
    pub aud: String,
    pub exp: i64,
    /// How the session began: `link`, or `key:<API key id>` (the session ends when that key is revoked).
    pub sub: String,
}

#[derive(Clone)]
pub struct ConsoleKeys {
    encoding: EncodingKey,
    decoding: DecodingKey,
}

impl ConsoleKeys {
    pub fn new(secret: &str) -> ConsoleKeys {
        ConsoleKeys {
            encoding: EncodingKey::from_secret(secret.as_bytes()),
            decoding: DecodingKey::from_secret(secret.as_bytes()),
        }
    }

    /// A session token for `sub`, from `now` (Unix seconds).
    pub fn mint(&self, sub: &str, now: i64) -> String {
        let claims = ConsoleClaims { aud: AUDIENCE.into(), exp: now + SESSION_TTL_SECONDS, sub: sub.into() };
        jsonwebtoken::encode(&Header::new(Algorithm::HS256), &claims, &self.encoding).expect("HS256 encodes")
    }

    pub fn verify(&self, token: &str) -> Option<ConsoleClaims> {
        let mut validation = Validation::new(Algorithm::HS256);
        validation.set_audience(&[AUDIENCE]);
        validation.leeway = 0;
        jsonwebtoken::decode::<ConsoleClaims>(token, &self.decoding, &validation).ok().map(|data| data.claims)
    }
}

/// The `Set-Cookie` value that starts a session (`Secure` when the console is served over HTTPS).
pub fn set_cookie(token: &str, secure: bool) -> String {
    let secure = if secure { "; Secure" } else { "" };
    format!("{COOKIE}={token}; Path=/; HttpOnly; SameSite=Strict; Max-Age={SESSION_TTL_SECONDS}{secure}")
}

/// The `Set-Cookie` value that ends it.
pub fn clear_cookie() -> String {
    format!("{COOKIE}=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0")
}

/// The session token in the request's cookies, if any.
pub fn cookie_token(headers: &HeaderMap) -> Option<&str> {
    headers
        .get_all(axum::http::header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .find_map(|pair| pair.trim().strip_prefix(COOKIE)?.strip_prefix('='))
        .filter(|token| !token.is_empty())
}

/// Whether the request comes from the console's own pages: the console header, and no `Origin` or
/// `Sec-Fetch-Site` naming another site (`Origin` must be this very host, as the browser reached it).
pub fn same_site(headers: &HeaderMap) -> bool {
    if !headers.contains_key(HEADER) {
        return false;
    }
    let text = |name: &str| headers.get(name).and_then(|value| value.to_str().ok());
    if let Some(site) = text("sec-fetch-site")
        && site != "same-origin"
        && site != "none"
    {
        return false;
    }
    text("origin").is_none_or(|origin| origin_is_host(origin, text("host")))
}

/// Whether `origin` (`http(s)://host[:port]`) is this very host as the browser reached it.
pub fn origin_is_host(origin: &str, host: Option<&str>) -> bool {
    host.is_some() && origin.strip_prefix("http://").or_else(|| origin.strip_prefix("https://")) == host
}

/// The console session of a request made on its cookie: Unauthorized without a valid one, Forbidden when
/// it is valid but the request is not the console's own.
pub fn session_of(keys: &ConsoleKeys, headers: &HeaderMap) -> Result<ConsoleClaims, ApiError> {
    let claims = cookie_token(headers).and_then(|token| keys.verify(token)).ok_or(ApiError::Unauthorized)?;
    if !same_site(headers) {
        return Err(ApiError::Forbidden(CROSS_SITE));
    }
    Ok(claims)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(*name, value.parse().unwrap());
        }
        map
    }

    #[test]
    fn a_session_needs_its_cookie_and_the_consoles_own_request() {
        let keys = ConsoleKeys::new("secret");
        let token = keys.mint("link", chrono::Utc::now().timestamp());
        let cookie = format!("theme=dark; {COOKIE}={token}");
        let own = headers(&[("cookie", &cookie), (HEADER, "1"), ("host", "127.0.0.1:8080")]);
        assert_eq!(session_of(&keys, &own).unwrap().sub, "link");
        let with_origin = headers(&[
            ("cookie", &cookie),
            (HEADER, "1"),
            ("host", "127.0.0.1:8080"),
            ("origin", "http://127.0.0.1:8080"),
            ("sec-fetch-site", "same-origin"),
        ]);
        assert!(session_of(&keys, &with_origin).is_ok());

        let no_header = headers(&[("cookie", &cookie), ("host", "127.0.0.1:8080")]);
        assert!(matches!(session_of(&keys, &no_header), Err(ApiError::Forbidden(_))));
        let elsewhere =
            headers(&[("cookie", &cookie), (HEADER, "1"), ("host", "127.0.0.1:8080"), ("origin", "http://evil.test")]);
        assert!(matches!(session_of(&keys, &elsewhere), Err(ApiError::Forbidden(_))));
        let cross = headers(&[("cookie", &cookie), (HEADER, "1"), ("sec-fetch-site", "cross-site")]);
        assert!(matches!(session_of(&keys, &cross), Err(ApiError::Forbidden(_))));

        assert!(matches!(session_of(&keys, &headers(&[(HEADER, "1")])), Err(ApiError::Unauthorized)));
        let forged =
            headers(&[("cookie", &format!("{COOKIE}={}", ConsoleKeys::new("other").mint("link", 0))), (HEADER, "1")]);
        assert!(matches!(session_of(&keys, &forged), Err(ApiError::Unauthorized)));
        let expired = keys.mint("link", chrono::Utc::now().timestamp() - 2 * SESSION_TTL_SECONDS);
        let stale = headers(&[("cookie", &format!("{COOKIE}={expired}")), (HEADER, "1")]);
        assert!(matches!(session_of(&keys, &stale), Err(ApiError::Unauthorized)));
    }

    #[test]
    fn the_cookie_is_httponly_and_strict() {
        let cookie = set_cookie("t", false);
        assert!(cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict") && !cookie.contains("Secure"));
        assert!(set_cookie("t", true).ends_with("; Secure"));
    }
}
