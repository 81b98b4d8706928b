//! The console's sign-in and its own API, on both databases: a one-time link works once; a key signs in
//! until it is revoked; the cookie is admitted only on the console's own requests; API keys are made and
//! revoked from the console only; a conversation's webhook deliveries read as the outbox holds them.

use axum::body::Body;
use axum::http::{Request, StatusCode};
use serde_json::{Value, json};

use crate::on_both_databases;
use crate::support::{TestApp, TestResponse};
use confab_store::console_links;

on_both_databases!(
    a_link_signs_in_once_and_the_cookie_works_only_from_the_console,
    a_key_session_ends_with_its_key_and_keys_are_managed_from_the_console,
);

const HOST: &str = "confab.test";

fn cookie_of(response: &TestResponse) -> String {
    let set = response.headers["set-cookie"].to_str().unwrap();
    assert!(set.contains("HttpOnly") && set.contains("SameSite=Strict") && set.contains("Path=/"), "{set}");
    set.split(';').next().unwrap().to_string()
}

/// A request as the console makes it (cookie, header, same host), with an optional JSON body.
async fn console(app: &TestApp, cookie: &str, method: &str, path: &str, body: Option<Value>) -> TestResponse {
    let request = Request::builder()
        .method(method)
        .uri(path)
        .header("host", HOST)
        .header("cookie", cookie)
        .header("x-confab-console", "1")
        .header("content-type", "application/json");
    app.send(request.body(body.map(|b| Body::from(b.to_string())).unwrap_or_default()).unwrap()).await
}

async fn a_link_signs_in_once_and_the_cookie_works_only_from_the_console(app: TestApp) {
    let code = console_links::mint(&app.db).await.unwrap();
    let link = format!("/console/login?code={code}");
    let signed = app.send(Request::get(&link).body(Body::empty()).unwrap()).await;
    assert_eq!(signed.status, StatusCode::SEE_OTHER);
    assert_eq!(signed.headers["location"], "/");
    let cookie = cookie_of(&signed);
    let again = app.send(Request::get(&link).body(Body::empty()).unwrap()).await;
    assert_eq!(again.status, StatusCode::UNAUTHORIZED, "a link works once");
    assert!(again.text().contains("has been used or has expired"));
    let made_up = app.send(Request::get("/console/login?code=nope").body(Body::empty()).unwrap()).await;
    assert_eq!(made_up.status, StatusCode::UNAUTHORIZED);

    let session = console(&app, &cookie, "GET", "/console/api/session", None).await;
    assert_eq!(session.status, StatusCode::OK, "{}", session.text());
    assert_eq!(session.json()["signed_in_with"], "link");
    assert_eq!(console(&app, &cookie, "GET", "/v1/ext/agent", None).await.status, StatusCode::OK);

    // Not the console's own request: no header, another origin, a cross-site fetch.
    let bare = app
        .send(Request::get("/v1/ext/agent").header("host", HOST).header("cookie", &cookie).body(Body::empty()).unwrap())
        .await;
    assert_eq!(bare.status, StatusCode::FORBIDDEN);
    assert_eq!(bare.json()["error"], "Forbidden: the console's session is not accepted from another site");
    for (name, value) in [("origin", "https://evil.test"), ("sec-fetch-site", "cross-site")] {
        let request = Request::post("/v1/ext/agent")
            .header("host", HOST)
            .header("cookie", &cookie)
            .header("x-confab-console", "1")
            .header(name, value)
            .header("content-type", "application/json")
            .body(Body::from("{}"))
            .unwrap();
        assert_eq!(app.send(request).await.status, StatusCode::FORBIDDEN, "{name}: {value}");
    }
    let forged = console(&app, "confab_console=eyJhbGciOiJIUzI1NiJ9.e30.x", "GET", "/v1/ext/agent", None).await;
    assert_eq!(forged.status, StatusCode::UNAUTHORIZED);

    // Signing out clears the cookie.
    let out = app.send(Request::post("/console/logout").body(Body::empty()).unwrap()).await;
    assert_eq!(out.status, StatusCode::SEE_OTHER);
    assert!(out.headers["set-cookie"].to_str().unwrap().contains("Max-Age=0"));
}

async fn a_key_session_ends_with_its_key_and_keys_are_managed_from_the_console(app: TestApp) {
    let form = |key: &str, origin: &str| {
        Request::post("/console/login")
            .header("host", HOST)
            .header("origin", origin)
            .header("content-type", "application/x-www-form-urlencoded")
            .body(Body::from(format!("key={key}")))
            .unwrap()
    };
    assert_eq!(app.send(form(&app.key, "https://evil.test")).await.status, StatusCode::FORBIDDEN);
    assert_eq!(app.send(form("cfb_wrong", &format!("http://{HOST}"))).await.status, StatusCode::UNAUTHORIZED);
    let signed = app.send(form(&app.key, &format!("http://{HOST}"))).await;
    assert_eq!(signed.status, StatusCode::SEE_OTHER, "{}", signed.text());
    let cookie = cookie_of(&signed);
    assert_eq!(console(&app, &cookie, "GET", "/console/api/session", None).await.json()["signed_in_with"], "key");

    // A key made in the console works with the API; its list never shows secrets.
    let made = console(&app, &cookie, "POST", "/console/api/keys", Some(json!({ "name": "laptop" }))).await;
    assert_eq!(made.status, StatusCode::CREATED, "{}", made.text());
    let (id, secret) =
        (made.json()["id"].as_str().unwrap().to_string(), made.json()["key"].as_str().unwrap().to_string());
    assert!(secret.starts_with("cfb_"));
    let with_new = Request::get("/v1/ext/agent").header("x-api-key", &secret).body(Body::empty()).unwrap();
    assert_eq!(app.send(with_new).await.status, StatusCode::OK);
    let listed = console(&app, &cookie, "GET", "/console/api/keys", None).await;
    assert!(!listed.text().contains(&secret));
    assert_eq!(listed.json()["data"].as_array().unwrap().len(), 2);
    let blank = console(&app, &cookie, "POST", "/console/api/keys", Some(json!({ "name": " " }))).await;
    assert_eq!(blank.status, StatusCode::BAD_REQUEST);
    // An API key cannot manage keys.
    assert_eq!(app.get("/console/api/keys").await.status, StatusCode::UNAUTHORIZED);

    // Deliveries of an unknown conversation: 404.
    let unknown = console(&app, &cookie, "GET", "/console/api/conversations/nope/webhooks", None).await;
    assert_eq!(unknown.status, StatusCode::NOT_FOUND);

    // Revoking the key the session began with ends the session.
    let revoked = console(&app, &cookie, "DELETE", &format!("/console/api/keys/{id}"), None).await;
    assert_eq!(revoked.status, StatusCode::OK);
    assert_eq!(
        console(&app, &cookie, "DELETE", &format!("/console/api/keys/{id}"), None).await.status,
        StatusCode::NOT_FOUND
    );
    let first =
        confab_store::api_keys::list_keys(&app.db).await.unwrap().into_iter().find(|k| k.name == "test").unwrap();
    assert_eq!(
        console(&app, &cookie, "DELETE", &format!("/console/api/keys/{}", first.id), None).await.status,
        StatusCode::OK
    );
    assert_eq!(console(&app, &cookie, "GET", "/console/api/session", None).await.status, StatusCode::UNAUTHORIZED);
}
