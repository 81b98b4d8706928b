//! Control-plane throughput, in process (router without a socket) on SQLite: creating an agent, reading
//! one, and listing a page of 20 out of 200, both as a polling client gets it (from the page cache) and
//! rendered afresh (the cache emptied before each request), and a search answered from the trigram index
//! (three characters or more, SQLite) and by a scan (fewer).

use axum::body::Body;
use axum::http::Request;
use confab_store::Db;
use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::json;
use tower::ServiceExt;

fn api(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}?mode=rwc", dir.path().join("bench.db").display());
    let (router, key, agent_id, state) = runtime.block_on(async {
        let db = Db::connect(&url).await.unwrap();
        let (router, key, state) = confab_benches::api_router_with_state(&db).await;
        let mut agent_id = String::new();
        for i in 0..200 {
            let response = router.clone().oneshot(create_request(&key, i)).await.unwrap();
            let bytes = axum::body::to_bytes(response.into_body(), usize::MAX).await.unwrap();
            agent_id = serde_json::from_slice::<serde_json::Value>(&bytes).unwrap()["id"].as_str().unwrap().to_string();
        }
        (router, key, agent_id, state)
    });
    let get = |path: String| Request::get(path).header("x-api-key", &key).body(Body::empty()).unwrap();

    let mut group = c.benchmark_group("api_sqlite");
    let mut n = 1000;
    group.bench_function("create_agent", |b| {
        b.iter(|| {
            n += 1;
            runtime.block_on(router.clone().oneshot(create_request(&key, n))).unwrap()
        })
    });
    group.bench_function("get_agent", |b| {
        b.iter(|| runtime.block_on(router.clone().oneshot(get(format!("/v1/ext/agent/{agent_id}")))).unwrap())
    });
    group.bench_function("list_agents_page_of_20", |b| {
        b.iter(|| runtime.block_on(router.clone().oneshot(get("/v1/ext/agent?perpage=20".into()))).unwrap())
    });
    group.bench_function("list_agents_page_of_20_uncached", |b| {
        b.iter(|| {
            state.pages.forget_all();
            runtime.block_on(router.clone().oneshot(get("/v1/ext/agent?perpage=20".into()))).unwrap()
        })
    });
    for (name, search) in [("search_uncached_trigram_index", "agent%2019"), ("search_uncached_scan", "t%201")] {
        group.bench_function(name, |b| {
            b.iter(|| {
                state.pages.forget_all();
                let path = format!("/v1/ext/agent?perpage=20&search={search}");
                runtime.block_on(router.clone().oneshot(get(path))).unwrap()
            })
        });
    }
    group.finish();
}

fn create_request(key: &str, i: u32) -> Request<Body> {
    let body = json!({
        "agent_name": format!("Agent {i}"),
        "agent_system_prompt": "You are helpful.",
        "avatars": [{ "avatar_key_id": "stock-amara" }],
        "callback_events": ["call_ended"]
    });
    Request::post("/v1/ext/agent")
        .header("x-api-key", key)
        .header("content-type", "application/json")
        .body(Body::from(body.to_string()))
        .unwrap()
}

criterion_group!(benches, api);
criterion_main!(benches);
