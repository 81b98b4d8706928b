use std::time::Duration;

use axum::http::StatusCode;
use base64::Engine;
use serde_json::{Value, json};

use crate::on_both_databases;
use crate::support::TestApp;

on_both_databases!(
    stock_avatars_have_real_pictures,
    custom_avatar_completes_and_serves_as_agent_avatar,
    corrupt_images_fail_with_an_error,
    custom_avatar_from_multipart,
    custom_avatar_errors
);

fn png(width: u32, height: u32) -> Vec<u8> {
    let mut bytes = Vec::new();
    let mut encoder = png::Encoder::new(&mut bytes, width, height);
    encoder.set_color(png::ColorType::Rgb);
    let mut writer = encoder.write_header().unwrap();
    let pixels: Vec<u8> = (0..width * height * 3).map(|i| (i % 251) as u8).collect();
    writer.write_image_data(&pixels).unwrap();
    drop(writer);
    bytes
}

/// A decompression bomb: `side`×`side` one-bit black pixels, a few kilobytes on the wire.
fn one_bit_png(side: u32) -> Vec<u8> {
    let mut bytes = Vec::new();
    let mut encoder = png::Encoder::new(&mut bytes, side, side);
    encoder.set_color(png::ColorType::Grayscale);
    encoder.set_depth(png::BitDepth::One);
    let mut writer = encoder.write_header().unwrap();
    writer.write_image_data(&vec![0u8; side.div_ceil(8) as usize * side as usize]).unwrap();
    drop(writer);
    assert!(bytes.len() < 100_000);
    bytes
}

/// A test picture from `scripts/fixtures.sh` (public-domain photos of real people: test inputs only).
fn fixture(name: &str) -> Vec<u8> {
    let dir = std::env::var_os("CONFAB_FIXTURES_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::path::PathBuf::from(std::env::var_os("HOME").unwrap()).join(".cache/confab/fixtures"));
    let path = dir.join(name);
    std::fs::read(&path).unwrap_or_else(|err| panic!("{}: {err}; run ./scripts/fixtures.sh", path.display()))
}

/// The first 60% of a file.
fn truncated(mut bytes: Vec<u8>) -> Vec<u8> {
    bytes.truncate(bytes.len() * 6 / 10);
    bytes
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

async fn poll_until_done(app: &TestApp, id: &str) -> Value {
    // A deadline, not a timing check: rigging waits its turn behind every other test's jobs.
    for _ in 0..1200 {
        let avatar = app.get(&format!("/v2/custom-avatar/{id}")).await.json();
        if avatar["status"] == "COMPLETED" || avatar["status"] == "FAILED" {
            return avatar;
        }
        assert!(avatar["status"] == "PENDING" || avatar["status"] == "PROCESSING", "{avatar}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("custom avatar {id} never finished");
}

async fn stock_avatars_have_real_pictures(app: TestApp) {
    let avatars = app.get("/v1/ext/avatars").await.json();
    let avatars = avatars.as_array().unwrap();
    assert!(avatars.len() >= 4);
    for avatar in avatars {
        let uri = avatar["display_picture"].as_str().unwrap();
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(uri.strip_prefix("data:image/png;base64,").unwrap())
            .unwrap();
        let decoder = png::Decoder::new(std::io::Cursor::new(bytes));
        let reader = decoder.read_info().unwrap();
        assert_eq!((reader.info().width, reader.info().height), (256, 256));
        assert!(!avatar["avatar_name"].as_str().unwrap().is_empty());
        assert!(["male", "female"].contains(&avatar["gender"].as_str().unwrap()));
    }
}

async fn custom_avatar_completes_and_serves_as_agent_avatar(app: TestApp) {
    let image = fixture("astronaut.png");
    let created = app
        .post(
            "/v2/custom-avatar",
            json!({ "image": format!("data:image/png;base64,{}", b64(&image)), "name": "Robin", "gender": "Other" }),
        )
        .await;
    assert_eq!(created.status, StatusCode::OK, "{}", created.text());
    let id = created.json()["id"].as_str().unwrap().to_string();
    assert_eq!(created.json()["status"], "PENDING");
    let avatar = poll_until_done(&app, &id).await;
    assert_eq!(avatar["status"], "COMPLETED", "{avatar}");
    assert_eq!(avatar["error"], "");
    assert_eq!(avatar["avatar_name"], "Robin");
    assert_eq!(avatar["gender"], "other");
    assert_eq!(avatar["job_id"], created.json()["job_id"]);
    assert_eq!(avatar["output"]["width"], 512);
    assert_eq!(avatar["output"]["height"], 512);
    assert_eq!(avatar["output"]["rig"], "landmarks");
    assert!(avatar["output"]["face_score"].as_f64().unwrap() > 0.8, "{avatar}");
    assert_eq!(confab_store::avatars::assets::count(&app.db, &id).await.unwrap(), 1);
    let (portrait, rig) = confab_store::avatars::assets::load(&app.db, &id).await.unwrap().expect("a stored face");
    assert_eq!((portrait.width, portrait.height), (512, 512));
    assert!(rig.mouth_center.1 > rig.nose_tip.1 && rig.chin.1 > rig.mouth_center.1, "{rig:?}");
    assert_eq!(avatar["output"]["display_picture"], format!("data:image/png;base64,{}", b64(&image)));

    let aliased = app
        .post("/v2/custom-avatar", json!({ "image_base64": b64(&image), "avatar_name": "Robin Two", "gender": "male" }))
        .await;
    assert_eq!(aliased.status, StatusCode::OK, "{}", aliased.text());

    let template = app.create("/v1/ext/template", json!({ "name": "T" })).await;
    let agent = app
        .post("/v1/ext/agentbytemplate", json!({ "template_id": template, "avatar_key_id": avatar["avatar_key_id"] }))
        .await;
    assert_eq!(agent.status, StatusCode::OK, "{}", agent.text());

    let deleted = app.delete(&format!("/v2/custom-avatar/{id}")).await;
    assert_eq!(deleted.json(), json!({ "id": id, "message": "Custom avatar deleted successfully" }));
    assert_eq!(app.get(&format!("/v2/custom-avatar/{id}")).await.status, StatusCode::NOT_FOUND);
    assert_eq!(confab_store::avatars::assets::count(&app.db, &id).await.unwrap(), 0, "DELETE leaves no face behind");
    assert!(confab_store::avatars::assets::load(&app.db, &id).await.unwrap().is_none());
}

async fn corrupt_images_fail_with_an_error(app: TestApp) {
    let cases = [
        (b"this is not an image at all".to_vec(), "Unsupported"),
        (png(16, 16), "too small"),
        (one_bit_png(8_000), "Image is too large: 8000x8000 pixels"),
        (png(100, 100)[..20].to_vec(), ""),
        (png(200, 160), "No face found in the image"),
        (fixture("coffee.png"), "No face found in the image"),
        // A photo cut short (its decoder would fill the rest with grey and find no face in it).
        (truncated(fixture("grace_hopper.jpg")), "Corrupt jpeg image: the file ends before the picture does"),
    ];
    for (bytes, expected) in cases {
        let id =
            app.create("/v2/custom-avatar", json!({ "image": b64(&bytes), "name": "Bad", "gender": "female" })).await;
        let avatar = poll_until_done(&app, &id).await;
        assert_eq!(avatar["status"], "FAILED", "{avatar}");
        assert!(avatar["error"].as_str().unwrap().contains(expected), "{avatar}");
    }
}

async fn custom_avatar_from_multipart(app: TestApp) {
    let boundary = "confabboundary";
    let mut body = Vec::new();
    for (name, value) in [("name", "Kim"), ("gender", "female")] {
        body.extend(
            format!("--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\"\r\n\r\n{value}\r\n").as_bytes(),
        );
    }
    body.extend(format!("--{boundary}\r\nContent-Disposition: form-data; name=\"image\"; filename=\"me.png\"\r\nContent-Type: image/png\r\n\r\n").as_bytes());
    body.extend(fixture("grace_hopper.jpg"));
    body.extend(format!("\r\n--{boundary}--\r\n").as_bytes());
    let response = app.post_raw("/v2/custom-avatar", &format!("multipart/form-data; boundary={boundary}"), body).await;
    assert_eq!(response.status, StatusCode::OK, "{}", response.text());
    let avatar = poll_until_done(&app, response.json()["id"].as_str().unwrap()).await;
    assert_eq!(avatar["status"], "COMPLETED", "{avatar}");
    assert_eq!(avatar["avatar_name"], "Kim");
    assert_eq!(avatar["output"]["format"], "jpeg");

    // A drawing (one of the engine's illustrated faces) completes too.
    let (drawing, _) = confab_engine::avatar::stock::stock_face("stock-sofia", 320).unwrap();
    let drawing = confab_store::avatars::portrait::encode_png(&drawing);
    let id =
        app.create("/v2/custom-avatar", json!({ "image": b64(&drawing), "name": "Drawn", "gender": "female" })).await;
    let avatar = poll_until_done(&app, &id).await;
    assert_eq!(avatar["status"], "COMPLETED", "{avatar}");
    assert!(confab_store::avatars::assets::load(&app.db, &id).await.unwrap().is_some());
}

async fn custom_avatar_errors(app: TestApp) {
    let missing = app.get("/v2/custom-avatar/5b0c1f8e-9a53-4a8e-8f3e-1c1a0c6f0b11").await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
    for body in [
        json!({ "image": "%%%not base64%%%", "name": "A", "gender": "female" }),
        json!({ "image": "", "name": "A", "gender": "female" }),
        json!({ "image": b64(&png(64, 64)), "name": "A", "gender": "robot" }),
        json!({ "image": b64(&png(64, 64)), "gender": "male" }),
    ] {
        let response = app.post("/v2/custom-avatar", body).await;
        assert_eq!(response.status, StatusCode::BAD_REQUEST, "{}", response.text());
    }
    let huge = vec![0u8; confab_http::avatars::custom::MAX_IMAGE_BYTES + 1];
    let response = app.post("/v2/custom-avatar", json!({ "image": b64(&huge), "name": "A", "gender": "male" })).await;
    assert_eq!(response.status, StatusCode::PAYLOAD_TOO_LARGE);
}
