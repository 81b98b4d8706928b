//! The test harness: a fresh database per test (a SQLite file, or a PostgreSQL database created for the
//! test and dropped after it), the real router driven without a socket, and an API key.

use std::future::Future;

use axum::Router;
use axum::body::Body;
use axum::http::{HeaderMap, Method, Request, StatusCode};
use confab_http::{AppConfig, AppState, app};
use confab_store::Db;
use confab_store::api_keys;
use http_body_util::BodyExt;
use serde_json::Value;
use tower::ServiceExt;

#[derive(Debug, Clone, Copy)]
pub enum Backend {
    Sqlite,
    Postgres,
}

pub struct TestApp {
    pub router: Router,
    pub db: Db,
    pub key: String,
}

#[derive(Debug)]
pub struct TestResponse {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Vec<u8>,
}

impl TestResponse {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|_| panic!("body is not JSON: {:?}", String::from_utf8_lossy(&self.body)))
    }

    pub fn text(&self) -> String {
        String::from_utf8(self.body.clone()).expect("UTF-8 body")
    }

    pub fn total_count(&self) -> i64 {
        self.headers["x-total-count"].to_str().unwrap().parse().unwrap()
    }
}

/// Where the PostgreSQL half of the suite connects; it must be reachable (CI fails loudly otherwise).
pub fn postgres_admin_url() -> String {
    std::env::var("CONFAB_TEST_POSTGRES_URL").unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into())
}

pub const PUBLIC_URL: &str = "http://confab.test";

impl TestApp {
    async fn start(url: &str) -> TestApp {
        let db = Db::connect(url).await.expect("connect to the test database");
        let state = AppState::new(
            db.clone(),
            AppConfig {
                public_url: PUBLIC_URL.into(),
                recordings_dir: "recordings".into(),
                models_dir: confab_models::default_models_dir(),
            },
        )
        .await
        .unwrap();
        let (_, key) = api_keys::create_key(&db, "test").await.unwrap();
        TestApp { router: app(state), db, key }
    }

    pub async fn send(&self, request: Request<Body>) -> TestResponse {
        let response = self.router.clone().oneshot(request).await.expect("the router is infallible");
        let status = response.status();
        let headers = response.headers().clone();
        let body = response.into_body().collect().await.unwrap().to_bytes().to_vec();
        TestResponse { status, headers, body }
    }

    /// A request with this app's API key and, when given, a JSON body.
    pub async fn call(&self, method: Method, path: &str, body: Option<Value>) -> TestResponse {
        let mut builder = Request::builder().method(method).uri(path).header("x-api-key", &self.key);
        let body = match body {
            Some(json) => {
                builder = builder.header("content-type", "application/json");
                Body::from(json.to_string())
            }
            None => Body::empty(),
        };
        self.send(builder.body(body).unwrap()).await
    }

    pub async fn get(&self, path: &str) -> TestResponse {
        self.call(Method::GET, path, None).await
    }

    pub async fn post(&self, path: &str, body: Value) -> TestResponse {
        self.call(Method::POST, path, Some(body)).await
    }

    pub async fn put(&self, path: &str, body: Value) -> TestResponse {
        self.call(Method::PUT, path, Some(body)).await
    }

    pub async fn delete(&self, path: &str) -> TestResponse {
        self.call(Method::DELETE, path, None).await
    }

    /// POST raw bytes with the key and the given content type.
    pub async fn post_raw(&self, path: &str, content_type: &str, body: impl Into<Body>) -> TestResponse {
        let request = Request::builder()
            .method(Method::POST)
            .uri(path)
            .header("x-api-key", &self.key)
            .header("content-type", content_type)
            .body(body.into())
            .unwrap();
        self.send(request).await
    }

    /// Creates a resource and returns its id, asserting a 200.
    pub async fn create(&self, path: &str, body: Value) -> String {
        let response = self.post(path, body).await;
        assert_eq!(response.status, StatusCode::OK, "{path}: {}", response.text());
        response.json()["id"].as_str().expect("id in the create answer").to_string()
    }
}

/// Runs `test` against a fresh database of `backend`, removing the database afterwards even when the
/// test fails.
pub async fn run<F, Fut>(backend: Backend, test: F)
where
    F: FnOnce(TestApp) -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    match backend {
        Backend::Sqlite => {
            let dir = tempfile::tempdir().unwrap();
            let url = format!("sqlite://{}?mode=rwc", dir.path().join("confab.db").display());
            let app = TestApp::start(&url).await;
            let outcome = tokio::spawn(test(app)).await;
            drop(dir);
            if let Err(err) = outcome {
                std::panic::resume_unwind(err.into_panic());
            }
        }
        Backend::Postgres => {
            let admin_url = postgres_admin_url();
            sqlx::any::install_default_drivers();
            let admin = sqlx::AnyPool::connect(&admin_url)
                .await
                .unwrap_or_else(|err| panic!("PostgreSQL must be reachable at {admin_url} for this suite: {err}"));
            let name = format!("confab_test_{}", uuid::Uuid::new_v4().simple());
            sqlx::query(&format!("CREATE DATABASE {name}")).execute(&admin).await.unwrap();
            let (base, _) = admin_url.rsplit_once('/').expect("URL with a database name");
            let app = TestApp::start(&format!("{base}/{name}")).await;
            let pool = app.db.pool.clone();
            let outcome = tokio::spawn(test(app)).await;
            pool.close().await;
            sqlx::query(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")).execute(&admin).await.unwrap();
            if let Err(err) = outcome {
                std::panic::resume_unwind(err.into_panic());
            }
        }
    }
}

/// Instantiates each listed `async fn(TestApp)` once on SQLite and once on PostgreSQL.
#[macro_export]
macro_rules! on_both_databases {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    $crate::support::run($crate::support::Backend::Sqlite, super::$name).await
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    $crate::support::run($crate::support::Backend::Postgres, super::$name).await
                }
            )*
        }
    };
}

pub const UNAUTHORIZED: &str = "Unauthorized: not a valid authorization api key";
