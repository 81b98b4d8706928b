//! `POST /v2/custom-avatar`'s body, JSON or multipart/form-data: the first byte picks the content type
//! (JSON, multipart with a fixed boundary, or multipart with a boundary taken from the input), the rest is
//! the body. Reading it must answer Ok or an API error, never panic.
#![no_main]

use axum::body::Body;
use axum::http::Request;
use confab_http::avatars::custom::read_upload;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&choice, rest)) = data.split_first() else { return };
    let (content_type, body) = match choice % 3 {
        0 => ("application/json".to_string(), rest),
        1 => ("multipart/form-data; boundary=confab".to_string(), rest),
        _ => {
            let split = rest.iter().position(|&b| b == b'\n').unwrap_or(rest.len());
            let boundary = String::from_utf8_lossy(&rest[..split]);
            (format!("multipart/form-data; boundary={boundary}"), rest.get(split + 1..).unwrap_or_default())
        }
    };
    let Ok(request) = Request::builder().method("POST").header("content-type", content_type).body(Body::from(body.to_vec()))
    else {
        return;
    };
    let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
    let _ = runtime.block_on(read_upload(request));
});
