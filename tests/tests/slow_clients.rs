//! Issue 10, defect 8: clients that send half a request are disconnected after the header read timeout,
//! and a connection limit bounds what they can hold; a normal request is still answered. The real
//! `confab serve --max-connections 20`, 30 half-sent requests, then a normal one.

use std::time::Duration;

use confab_tests::server::Server;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn half_sent_requests_are_dropped_and_cannot_starve_the_server() {
    let data = std::env::temp_dir().join(format!("confab-slow-clients-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&data);
    let mut server = Server::start(&data, &["--max-connections", "20"]).await;
    let mut stalled = Vec::new();
    for _ in 0..30 {
        let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", server.port)).await.unwrap();
        stream.write_all(b"GET / HTTP/1.1\r\nHost: confab\r\nX-Half: ").await.unwrap();
        stalled.push(stream);
    }
    // A normal request is answered once the stalled ones ahead of it are cut off.
    let client = reqwest::Client::builder().timeout(Duration::from_secs(60)).build().unwrap();
    let answer = client.get(format!("{}/", server.base)).send().await.expect("answered");
    assert_eq!(answer.status(), 200);
    // Every half-sent request's connection is closed by the server (end of stream or a reset), none of
    // them answered.
    for (index, stream) in stalled.iter_mut().enumerate() {
        let mut buffer = [0u8; 256];
        let read = tokio::time::timeout(Duration::from_secs(60), stream.read(&mut buffer)).await;
        match read {
            Ok(Ok(0)) | Ok(Err(_)) => {}
            Ok(Ok(n)) => {
                let text = String::from_utf8_lossy(&buffer[..n]);
                assert!(!text.starts_with("HTTP/1.1 200"), "stalled request {index} was answered: {text}");
            }
            Err(_) => panic!("stalled connection {index} is still open after a minute"),
        }
    }
    server.terminate();
    let _ = std::fs::remove_dir_all(&data);
}
