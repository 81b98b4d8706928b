//! The console at `/`, as a person uses it, in real browsers against the real `confab serve`: Chromium signs in
//! through the one-time link the server printed, creates an agent from the form (a stock face chosen by its
//! picture, the local models, a webhook URL), talks to it with its fake microphone (the question is answered
//! and shows in the transcript beside the call), hangs up, and opens the conversation: the transcript, the
//! recording's `<video>` playing (duration > 0), the timeline of each turn drawn, the webhook deliveries; then
//! makes an API key (shown once, working) and revokes it (refused). Firefox signs in with a pasted API key and
//! holds a call from the Talk page (Web Audio microphone), after one whose microphone the browser refused
//! (the page says what to do). Around them, over plain HTTP: a used link is
//! refused, and the API refuses a request without the cookie, without the console's header, or from
//! another origin. With `CONFAB_CONSOLE_SCREENSHOTS=<dir>` each page is saved there as a PNG (docs/console/).

use std::path::{Path, PathBuf};
use std::time::Duration;

use confab_tests::browser::{Browser, microphone_from_wav_in};
use confab_tests::netns::enter_loopback_only;
use confab_tests::receiver::Receiver;
use confab_tests::server::{Server, api, create_key, wait_for_preload, wait_for_status};
use confab_tests::{scratch, spoken_wav};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

const QUESTION: &str = "What is the capital of France?";

#[test]
fn a_person_uses_the_console_in_chromium_and_firefox() {
    if enter_loopback_only("a_person_uses_the_console_in_chromium_and_firefox") {
        tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap().block_on(console_tour());
    }
}

struct Shots(Option<PathBuf>);

impl Shots {
    async fn take(&self, browser: &mut Browser, name: &str) {
        if let Some(dir) = &self.0 {
            tokio::time::sleep(Duration::from_millis(400)).await;
            browser.screenshot(&dir.join(format!("{name}.png"))).await;
        }
    }
}

async fn console_tour() {
    let dir = scratch("console");
    let shots = Shots(std::env::var_os("CONFAB_CONSOLE_SCREENSHOTS").map(PathBuf::from));
    let question = dir.join("question.wav");
    spoken_wav(&question, QUESTION, 1.0, 5.0);
    let files = Receiver::start(vec![("question.wav".into(), std::fs::read(&question).unwrap())]).await;
    let data = dir.join("data");
    let key = create_key(&data);
    let server = Server::start(&data, &["--allow-private-webhooks"]).await;
    wait_for_preload(&data).await;
    let link = sign_in_link(&data);
    let base = server.base.clone();
    plain_http_refusals(&base, &key).await;

    let microphone = dir.join("chromium-question.wav");
    spoken_wav(&microphone, QUESTION, 3.0, 40.0);
    let mut chromium = Browser::chromium(&link, &microphone, &dir.join("chromium.log")).await;
    let hooks = Receiver::start(vec![]).await;
    let id = chromium_tour(&mut chromium, &base, &key, &hooks, &shots).await;
    chromium.kill();
    // The link is spent.
    let again = reqwest::get(&link).await.unwrap();
    assert_eq!(again.status(), StatusCode::UNAUTHORIZED);
    assert!(again.text().await.unwrap().contains("has been used or has expired"));

    let mut firefox = Browser::firefox(&format!("{base}/"), &dir.join("firefox.log")).await;
    firefox_talks(&mut firefox, &base, &key, &files.files_url).await;
    firefox.kill();
    assert!(!id.is_empty());
    let _ = std::fs::remove_dir_all(&dir);
}

/// The one-time link in the server's first lines.
fn sign_in_link(data: &Path) -> String {
    let log = std::fs::read_to_string(data.join("serve.log")).unwrap();
    let at = log.find("/console/login?code=").expect("the server printed a console sign-in link");
    let start = log[..at].rfind("http://").unwrap();
    log[start..].split_whitespace().next().unwrap().to_string()
}

/// What plain HTTP clients are told: JSON at `/` unless they ask for HTML; the API refuses cookie
/// requests that are not the console's own.
async fn plain_http_refusals(base: &str, key: &str) {
    let client = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    let landing: Value = client.get(format!("{base}/")).send().await.unwrap().json().await.unwrap();
    assert_eq!(landing["service"], "confab");
    let page = client.get(format!("{base}/")).header("accept", "text/html").send().await.unwrap();
    assert!(page.text().await.unwrap().contains("/console/assets/console.js"));

    // Signing in with a key: the form from this very site is admitted; from another site, refused.
    let host = base.strip_prefix("http://").unwrap();
    let form = [("key", key)];
    let elsewhere =
        client.post(format!("{base}/console/login")).header("origin", "http://evil.test").form(&form).send().await;
    assert_eq!(elsewhere.unwrap().status(), StatusCode::FORBIDDEN);
    let wrong = client.post(format!("{base}/console/login")).header("origin", base).form(&[("key", "cfb_nope")]);
    assert_eq!(wrong.send().await.unwrap().status(), StatusCode::UNAUTHORIZED);
    let signed = client.post(format!("{base}/console/login")).header("origin", base).form(&form).send().await.unwrap();
    assert_eq!(signed.status(), StatusCode::SEE_OTHER);
    let cookie = signed.headers()["set-cookie"].to_str().unwrap().to_string();
    assert!(cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"), "{cookie}");
    let cookie = cookie.split(';').next().unwrap().to_string();

    let agents = format!("{base}/v1/ext/agent");
    let ask = |origin: Option<&str>, header: bool, with_cookie: bool| {
        let mut request = client.get(&agents).header("host", host);
        if with_cookie {
            request = request.header("cookie", &cookie);
        }
        if header {
            request = request.header("x-confab-console", "1");
        }
        if let Some(origin) = origin {
            request = request.header("origin", origin);
        }
        request.send()
    };
    assert_eq!(ask(Some(base), true, true).await.unwrap().status(), StatusCode::OK, "the console's own request");
    assert_eq!(ask(None, true, false).await.unwrap().status(), StatusCode::UNAUTHORIZED, "no cookie");
    let forbidden = ask(Some("http://evil.test"), true, true).await.unwrap();
    assert_eq!(forbidden.status(), StatusCode::FORBIDDEN, "another origin");
    let body: Value = forbidden.json().await.unwrap();
    assert!(body["error"].as_str().unwrap().starts_with("Forbidden"), "{body}");
    assert_eq!(ask(None, false, true).await.unwrap().status(), StatusCode::FORBIDDEN, "no console header");
    let keys = client.get(format!("{base}/console/api/keys")).header("x-api-key", key).send().await.unwrap();
    assert_eq!(keys.status(), StatusCode::UNAUTHORIZED, "API keys are managed from the console only");
}

/// Sets a form field as a person typing would (Preact listens to `input`).
fn type_into(selector: &str, value: &str) -> String {
    format!(
        "(() => {{ const field = document.querySelector({selector:?}); field.value = {value:?}; \
         field.dispatchEvent(new Event('input', {{ bubbles: true }})); return true; }})()"
    )
}

async fn chromium_tour(browser: &mut Browser, base: &str, key: &str, hooks: &Receiver, shots: &Shots) -> String {
    let client = reqwest::Client::new();
    let long = Duration::from_secs(20);
    // The link signed us in and led to the console.
    browser.wait_for("!!document.querySelector('#agents')", &json!(true), long).await;
    shots.take(browser, "agents").await;

    // A new agent from the form.
    browser.eval("location.hash = '#/agents/new'").await;
    browser.wait_for("document.querySelectorAll('.faces img').length > 0", &json!(true), long).await;
    browser.eval(&type_into("input[name=name]", "Geographer")).await;
    browser
        .eval(&type_into("textarea[name=prompt]", "You are a helpful assistant. Answer in one short sentence."))
        .await;
    browser.eval(&type_into("input[name=callback]", &hooks.hook_url)).await;
    browser.eval("document.querySelectorAll('.faces button')[1].click()").await;
    browser
        .wait_for("document.querySelectorAll('.faces button')[1].getAttribute('aria-pressed')", &json!("true"), long)
        .await;
    shots.take(browser, "new-agent").await;
    browser.eval("document.querySelector('#agent-form button[type=submit]').click()").await;
    browser.wait_for("location.hash.startsWith('#/talk/')", &json!(true), long).await;
    let agent_id = browser.eval("location.hash.split('/')[2]").await.as_str().unwrap().to_string();
    let agent = api(&client, key, Method::GET, format!("{base}/v1/ext/agent/{agent_id}"), None).await;
    assert_eq!(agent["agent_name"], "Geographer");
    let secret = agent["webhook_secret"].as_str().unwrap().to_string();

    // Talk: the call in the page, the transcript beside it.
    browser.wait_for("!!document.getElementById('start-call')", &json!(true), long).await;
    browser.eval("document.getElementById('start-call').click()").await;
    let call_page = "document.getElementById('call')?.contentDocument?.body?.dataset.state";
    browser.wait_for(call_page, &json!("ready"), long).await;
    browser.eval("document.getElementById('call').contentDocument.getElementById('join').click()").await;
    browser.wait_for(call_page, &json!("live"), long).await;
    let answered = "[...document.querySelectorAll('#transcript li')].some((li) => li.className === 'user' && \
                    /capital/i.test(li.textContent)) && !!document.querySelector('#transcript li.assistant')";
    browser.wait_for(answered, &json!(true), Duration::from_secs(90)).await;
    shots.take(browser, "talk").await;
    browser.eval("document.getElementById('console-hangup').click()").await;
    browser.wait_for("location.hash.startsWith('#/conversations/')", &json!(true), long).await;
    let id = browser.eval("location.hash.split('/')[2]").await.as_str().unwrap().to_string();

    // The conversation: transcript, the recording playing, the timeline drawn.
    browser.wait_for("!!document.getElementById('recording')", &json!(true), Duration::from_secs(30)).await;
    let playing = "(async () => { const v = document.getElementById('recording'); if (v.readyState < 1) \
                   await new Promise((ok) => v.addEventListener('loadedmetadata', ok, { once: true })); \
                   await v.play().catch(() => {}); return v.duration > 0 && !v.error; })()";
    assert_eq!(browser.eval(playing).await, json!(true), "the recording plays");
    browser.wait_for("document.querySelectorAll('#timeline rect').length > 0", &json!(true), long).await;
    let transcript = browser.eval("document.getElementById('transcript').innerText").await;
    assert!(transcript.as_str().unwrap().to_lowercase().contains("capital"), "{transcript}");
    shots.take(browser, "conversation").await;

    // Its webhook deliveries, signed and delivered.
    hooks.wait_for_event(&secret, &id, "call_ended", long).await;
    browser.eval(&format!("location.hash = '#/webhooks/{id}'")).await;
    let delivered = "[...document.querySelectorAll('#deliveries td')].some((td) => td.textContent === 'call_ended') && \
                     document.querySelectorAll('#deliveries .status-delivered').length > 0";
    browser.wait_for(delivered, &json!(true), long).await;
    shots.take(browser, "webhooks").await;

    // Keys: one made (shown once, and it works), then revoked (refused).
    browser.eval("location.hash = '#/keys'").await;
    browser.wait_for("!!document.getElementById('key-form')", &json!(true), long).await;
    browser.eval(&type_into("#key-form input[name=name]", "ci")).await;
    browser.eval("document.querySelector('#key-form button').click()").await;
    browser.wait_for("!!document.querySelector('#new-key .secret')", &json!(true), long).await;
    let made = browser.eval("document.querySelector('#new-key .secret').textContent").await;
    let made = made.as_str().unwrap().to_string();
    let agents = format!("{base}/v1/ext/agent");
    assert_eq!(client.get(&agents).header("x-api-key", &made).send().await.unwrap().status(), StatusCode::OK);
    shots.take(browser, "keys").await;
    browser.eval("window.confirm = () => true").await;
    let revoke = "[...document.querySelectorAll('#keys tr')].find((tr) => tr.cells[0]?.textContent === 'ci')\
                  .querySelector('button').click()";
    browser.eval(revoke).await;
    browser.wait_for("document.querySelectorAll('#keys .danger').length", &json!(1), long).await;
    let refused = client.get(&agents).header("x-api-key", &made).send().await.unwrap();
    assert_eq!(refused.status(), StatusCode::UNAUTHORIZED);
    id
}

/// Firefox: signs in with a pasted key, and talks from the Talk page (its microphone the question, through
/// Web Audio in the call's frame).
async fn firefox_talks(browser: &mut Browser, base: &str, key: &str, files_url: &str) {
    let client = reqwest::Client::new();
    let long = Duration::from_secs(20);
    browser.wait_for("!!document.getElementById('signin')", &json!(true), long).await;
    browser.eval(&type_into("#signin input[name=key]", key)).await;
    browser.eval("document.getElementById('signin').submit()").await;
    browser.wait_for("!!document.querySelector('#agents')", &json!(true), long).await;
    browser.wait_for("document.querySelectorAll('#agents tbody tr').length", &json!(1), long).await;
    browser.eval("document.querySelector('#agents tbody a').click()").await;
    browser.wait_for("!!document.getElementById('start-call')", &json!(true), long).await;
    browser.eval("document.getElementById('start-call').click()").await;
    let call_page = "document.getElementById('call')?.contentDocument?.body?.dataset.state";
    browser.wait_for(call_page, &json!("ready"), long).await;
    let frame = "document.getElementById('call').contentWindow";

    // A browser that will not give the microphone: the page says what to do.
    let deny = format!(
        "{frame}.navigator.mediaDevices.getUserMedia = () => \
         Promise.reject(new DOMException('Permission denied', 'NotAllowedError')); true"
    );
    browser.eval(&deny).await;
    browser.eval("document.getElementById('call').contentDocument.getElementById('join').click()").await;
    browser.wait_for(call_page, &json!("error"), long).await;
    let said =
        browser.eval("document.getElementById('call').contentDocument.getElementById('state').textContent").await;
    assert_eq!(
        said,
        json!(
            "Error: the browser did not allow the microphone: allow it for this site (the icon beside the address) and reload"
        )
    );
    // Reloaded, the Talk page starts a new call.
    browser.eval("setTimeout(() => location.reload(), 50); true").await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    browser.wait_for("!!document.getElementById('start-call')", &json!(true), long).await;
    browser.eval("document.getElementById('start-call').click()").await;
    browser.wait_for(call_page, &json!("ready"), long).await;
    let wav_url = format!("{files_url}/question.wav");
    assert_eq!(browser.eval(&microphone_from_wav_in(frame, &wav_url)).await, json!(true));
    browser.eval("document.getElementById('call').contentDocument.getElementById('join').click()").await;
    browser.wait_for(call_page, &json!("live"), long).await;
    let id = browser.eval("document.getElementById('call').contentWindow.location.pathname.split('/').pop()").await;
    let id = id.as_str().unwrap().to_string();
    wait_for_status(&client, key, base, &id, "IN_PROGRESS", Duration::from_secs(10)).await;
    assert_eq!(browser.eval("window.speak()").await, json!("running"));
    let answered = "[...document.querySelectorAll('#transcript li')].some((li) => li.className === 'user' && \
                    /capital/i.test(li.textContent)) && !!document.querySelector('#transcript li.assistant')";
    browser.wait_for(answered, &json!(true), Duration::from_secs(90)).await;
    browser.eval("document.getElementById('console-hangup').click()").await;
    wait_for_status(&client, key, base, &id, "ENDED", Duration::from_secs(20)).await;
}
