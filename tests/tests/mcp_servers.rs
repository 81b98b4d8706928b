//! Confab's MCP client against real MCP servers: the reference TypeScript server
//! (`@modelcontextprotocol/server-everything`, npm) and a server on the official Python SDK
//! (`tests/fixtures/mcp_server.py`), each over Streamable HTTP and over the older HTTP+SSE transport.
//! The TypeScript server binds every interface, so the test runs in a loopback-only network namespace.
//! Installed by `scripts/setup.sh` under `CONFAB_TEST_TOOLS` (default `/var/tmp/confab-tools`).

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use confab_engine::actions::records::ActionsSpec;
use confab_engine::actions::{Action, ActionSettings, Actions};
use confab_tests::netns::enter_loopback_only;
use serde_json::{Map, Value, json};

fn tools_dir() -> PathBuf {
    std::env::var_os("CONFAB_TEST_TOOLS").map(PathBuf::from).unwrap_or_else(|| PathBuf::from("/var/tmp/confab-tools"))
}

/// A server process, killed when dropped.
struct McpProcess {
    child: Child,
    port: u16,
}

impl Drop for McpProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

async fn wait_for_port(port: u16) {
    for _ in 0..300 {
        if tokio::net::TcpStream::connect(("127.0.0.1", port)).await.is_ok() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the MCP server on port {port} did not start");
}

/// `mcp-server-everything streamableHttp|sse` on a free port.
async fn everything(transport: &str) -> McpProcess {
    let port = free_port();
    let script = tools_dir().join("mcp-everything/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    assert!(script.exists(), "{} is missing: run scripts/setup.sh", script.display());
    let child = Command::new("node")
        .arg(script)
        .arg(transport)
        .env("PORT", port.to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("node runs");
    wait_for_port(port).await;
    McpProcess { child, port }
}

/// The Python SDK's server (`sse` or `streamable-http`) on a free port.
async fn python(transport: &str) -> McpProcess {
    let port = free_port();
    let python = tools_dir().join("mcp-python/bin/python");
    assert!(python.exists(), "{} is missing: run scripts/setup.sh", python.display());
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/mcp_server.py");
    let child = Command::new(python)
        .arg(script)
        .arg(transport)
        .arg(port.to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("python runs");
    wait_for_port(port).await;
    McpProcess { child, port }
}

fn settings() -> ActionSettings {
    ActionSettings { allow_private_urls: true, conversation_id: "c".into(), webhook_secret: String::new() }
}

/// An agent's actions as the engine reads them from the Agent resource.
fn actions_of(agent: Value) -> ActionsSpec {
    serde_json::from_value(agent).expect("well-formed records")
}

async fn connect(records: Value) -> Actions {
    let mut actions = Actions::from_agent(&actions_of(json!({ "mcp": records })), settings()).unwrap();
    actions.connect_mcp().await;
    actions
}

async fn call(actions: &Actions, name: &str, arguments: Value) -> Result<Value, String> {
    let Some(Action::Mcp(tool)) = actions.find(name) else { panic!("no MCP tool {name}") };
    let arguments: Map<String, Value> = serde_json::from_value(arguments).unwrap();
    tool.call(arguments).await
}

fn record(name: &str, kind: &str, url: String) -> Value {
    json!({ "name": name, "type": kind, "request_config": { "url": url, "headers": { "x-confab-test": "1" } } })
}

#[test]
fn mcp_tools_are_listed_and_called_over_streamable_http_and_sse() {
    if !enter_loopback_only("mcp_tools_are_listed_and_called_over_streamable_http_and_sse") {
        return;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    runtime.block_on(async {
        let (streamable, sse) = (everything("streamableHttp").await, everything("sse").await);
        for (kind, url) in [
            ("shttp", format!("http://127.0.0.1:{}/mcp", streamable.port)),
            ("shttp/sse", format!("http://127.0.0.1:{}/mcp", streamable.port)),
            ("sse", format!("http://127.0.0.1:{}/sse", sse.port)),
            ("shttp/sse", format!("http://127.0.0.1:{}/sse", sse.port)),
        ] {
            let actions = connect(json!([record("everything", kind, url.clone())])).await;
            let names: Vec<&str> = actions.mcp_tools.iter().map(|t| t.spec.name.as_str()).collect();
            assert!(names.contains(&"echo") && names.contains(&"get-sum"), "{kind} {url}: {names:?}");
            let echo = actions.mcp_tools.iter().find(|t| t.spec.name == "echo").unwrap();
            assert_eq!(echo.spec.parameters["type"], "object");
            assert!(echo.spec.parameters["properties"]["message"].is_object(), "{}", echo.spec.parameters);
            let echoed = call(&actions, "echo", json!({ "message": "hello from Confab" })).await.unwrap();
            assert!(echoed["text"].as_str().unwrap().contains("hello from Confab"), "{kind}: {echoed}");
            let sum = call(&actions, "get-sum", json!({ "a": 2, "b": 3 })).await.unwrap();
            assert!(sum["text"].as_str().unwrap().contains('5'), "{kind}: {sum}");
        }

        let (streamable, sse) = (python("streamable-http").await, python("sse").await);
        for (kind, url) in [
            ("shttp", format!("http://127.0.0.1:{}/mcp", streamable.port)),
            ("sse", format!("http://127.0.0.1:{}/sse", sse.port)),
            ("shttp/sse", format!("http://127.0.0.1:{}/sse", sse.port)),
        ] {
            let actions = connect(json!([record("orders", kind, url.clone())])).await;
            let order = call(&actions, "lookup_order", json!({ "order_id": "A-17" })).await.unwrap();
            assert!(order.to_string().contains("Order A-17 ships tomorrow."), "{kind} {url}: {order}");
        }

        // An unreachable server is skipped; the others' tools are still offered.
        let closed = free_port();
        let actions = connect(json!([
            record("gone", "shttp/sse", format!("http://127.0.0.1:{closed}/mcp")),
            record("orders", "shttp", format!("http://127.0.0.1:{}/mcp", streamable.port)),
        ]))
        .await;
        let specs = actions.specs();
        let names: Vec<&str> = specs.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["lookup_order"]);
    });
}

#[test]
fn a_private_mcp_address_is_refused_by_default() {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let accepted = tokio::spawn(async move { listener.accept().await.is_ok() });
        let settings = ActionSettings { allow_private_urls: false, ..settings() };
        let agent = json!({ "mcp": [record("local", "shttp/sse", format!("http://127.0.0.1:{port}/mcp"))] });
        let mut actions = Actions::from_agent(&actions_of(agent), settings).unwrap();
        actions.connect_mcp().await;
        assert!(actions.mcp_tools.is_empty());
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(!accepted.is_finished(), "nothing connected to the private address");
    });
}
