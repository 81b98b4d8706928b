//! One meeting bot, from request to goodbye: starts its Chromium, opens the meeting, gets through the
//! pre-join screen and the lobby (`driver.js` with the platform's adapter), then places the agent's call
//! (`bridge.js`'s offer, answered by this Confab's media path) and stays until the meeting ends, it is
//! removed, it has been alone too long, or the call ends (max duration, hang-up). A bot that cannot join
//! ends its conversation with a reason (`Failure`); the browser is always killed at the end.

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::sync::watch;

use super::browser::Browser;
use super::cdp::CdpError;
use super::platforms;
use super::{MeetingJob, MeetingSettings};
use crate::BotContext;
use confab_store::conversations::{self, STATUS_ENDED};
use confab_store::meeting_speakers as speakers;

/// How often the bot looks at the meeting page.
const POLL: Duration = Duration::from_millis(250);
/// Longest wait for one look at the page (a page busy loading answers slowly).
const EVAL_TIMEOUT: Duration = Duration::from_secs(10);
/// Longest wait for the page to load.
const NAVIGATION_TIMEOUT: Duration = Duration::from_secs(30);
/// Longest wait for the agent's offer (ICE gathering is cut at 3 s in the page).
const OFFER_TIMEOUT: Duration = Duration::from_secs(15);

/// Why a bot could not take part; stored as the conversation's `end_reason` and sent in `call_ended`'s
/// payload as `{"reason": …}` (docs/meetings.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// Chromium could not be started.
    BrowserFailed,
    /// The meeting page did not load (network error, unknown host, TLS).
    MeetingUnreachable,
    /// The page loaded but no pre-join screen or call was recognised in time.
    JoinFailed,
    /// The bot waited in the lobby longer than the lobby timeout.
    AdmissionTimeout,
    /// The host refused to admit the bot (or the meeting ended before it was admitted).
    AdmissionRefused,
    /// Admitted, but the agent's call could not be placed (no free media session, no media worker).
    CallFailed,
}

impl Failure {
    pub fn reason(self) -> &'static str {
        match self {
            Failure::BrowserFailed => "browser_failed",
            Failure::MeetingUnreachable => "meeting_unreachable",
            Failure::JoinFailed => "join_failed",
            Failure::AdmissionTimeout => "admission_timeout",
            Failure::AdmissionRefused => "admission_refused",
            Failure::CallFailed => "call_failed",
        }
    }
}

/// Why a bot that took part left; stored as the conversation's `end_reason`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Departure {
    MeetingEnded,
    Removed,
    Alone,
    /// The call itself ended: maximum duration, hang-up through the API, or the media failed.
    CallEnded,
    /// The bot's browser stopped answering.
    BrowserLost,
    /// The server is shutting down.
    Shutdown,
}

impl Departure {
    pub fn reason(self) -> &'static str {
        match self {
            Departure::MeetingEnded => "meeting_ended",
            Departure::Removed => "removed_from_meeting",
            Departure::Alone => "left_alone",
            Departure::CallEnded => "call_ended",
            Departure::BrowserLost => "browser_lost",
            Departure::Shutdown => "server_shutdown",
        }
    }
}

/// What the driver sees on the page.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Phase {
    Loading,
    PreJoin,
    Lobby,
    Refused,
    InCall { participants: usize, speaker: Option<String> },
    Ended,
    Removed,
}

fn phase(value: &Value) -> Phase {
    match value["phase"].as_str().unwrap_or("loading") {
        "prejoin" | "joining" => Phase::PreJoin,
        "lobby" => Phase::Lobby,
        "refused" => Phase::Refused,
        "ended" => Phase::Ended,
        "removed" => Phase::Removed,
        "in_call" => Phase::InCall {
            participants: value["participants"].as_u64().unwrap_or(0) as usize,
            speaker: value["speaker"].as_str().filter(|s| !s.is_empty()).map(str::to_string),
        },
        _ => Phase::Loading,
    }
}

pub struct Bot {
    context: BotContext,
    settings: MeetingSettings,
    job: MeetingJob,
    /// The driver's look at the page (`driver.js` with this platform's adapter, name and e-mail), built
    /// once: the bot evaluates it four times a second.
    poll_expression: String,
    stop: watch::Receiver<bool>,
}

impl Bot {
    pub fn new(context: BotContext, settings: MeetingSettings, job: MeetingJob, stop: watch::Receiver<bool>) -> Bot {
        let adapter = serde_json::to_string(platforms::adapter(job.platform)).expect("adapters serialize");
        let poll_expression = format!(
            "window.__confabDriver ? window.__confabDriver.poll({adapter}, {}, {}) : {{phase: 'loading'}}",
            json!(job.display_name),
            json!(job.email),
        );
        Bot { context, settings, job, poll_expression, stop }
    }

    /// Attends the meeting; the conversation reads ENDED when this returns.
    pub async fn run(mut self) {
        let id = self.job.conversation_id.clone();
        let started = Instant::now();
        tracing::info!(conversation_id = %id, platform = self.job.platform.name(), "meeting bot starting");
        let mut browser = match Browser::start(&self.settings.browser).await {
            Ok(browser) => browser,
            Err(err) => {
                tracing::warn!(conversation_id = %id, error = %err, "the meeting bot's browser did not start");
                return self.end_with(Failure::BrowserFailed.reason()).await;
            }
        };
        let outcome = match self.join(&mut browser, started).await {
            Err(failure) => Err(failure),
            Ok(()) => self.take_part(&mut browser).await,
        };
        match outcome {
            Ok(departure) => {
                tracing::info!(conversation_id = %id, reason = departure.reason(), "meeting bot leaving");
                let _ = browser.page.eval("window.__confab && window.__confab.close()", EVAL_TIMEOUT).await;
                self.leave(departure).await;
            }
            Err(failure) => {
                let reason = if *self.stop.borrow() { Departure::Shutdown.reason() } else { failure.reason() };
                tracing::warn!(conversation_id = %id, reason, "meeting bot could not take part");
                self.hang_up().await;
                self.end_with(reason).await;
            }
        }
        speakers::forget(&id);
        browser.close().await;
    }

    async fn look(&self, browser: &mut Browser) -> Result<Phase, CdpError> {
        Ok(phase(&browser.page.eval(&self.poll_expression, EVAL_TIMEOUT).await?))
    }

    /// Opens the meeting and waits until the bot is in the call.
    async fn join(&mut self, browser: &mut Browser, requested: Instant) -> Result<(), Failure> {
        let page = &mut browser.page;
        for script in [super::DRIVER_JS, super::BRIDGE_JS] {
            page.add_script_on_new_document(script).await.map_err(|_| Failure::BrowserFailed)?;
        }
        if let Err(err) = page.navigate(&self.job.join_url, NAVIGATION_TIMEOUT).await {
            tracing::warn!(conversation_id = %self.job.conversation_id, error = %err, "the meeting page did not load");
            return Err(Failure::MeetingUnreachable);
        }
        let loaded = Instant::now();
        let mut lobby_since: Option<Instant> = None;
        loop {
            if *self.stop.borrow() {
                return Err(Failure::JoinFailed);
            }
            let seen = self.look(browser).await.unwrap_or(Phase::Loading);
            match seen {
                Phase::InCall { .. } => return Ok(()),
                Phase::Refused | Phase::Removed | Phase::Ended => return Err(Failure::AdmissionRefused),
                Phase::Lobby => {
                    let since = *lobby_since.get_or_insert_with(Instant::now);
                    if since.elapsed() > self.settings.lobby_timeout
                        || requested.elapsed() > self.settings.lobby_timeout + self.settings.join_timeout
                    {
                        return Err(Failure::AdmissionTimeout);
                    }
                }
                Phase::Loading | Phase::PreJoin => {
                    if loaded.elapsed() > self.settings.join_timeout {
                        return Err(Failure::JoinFailed);
                    }
                }
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// Places the agent's call and stays in the meeting until a reason to leave.
    async fn take_part(&mut self, browser: &mut Browser) -> Result<Departure, Failure> {
        let id = self.job.conversation_id.clone();
        let offer = browser.page.eval("window.__confab.offer()", OFFER_TIMEOUT).await.map_err(|err| {
            tracing::warn!(conversation_id = %id, error = %err, "the bot's page made no offer");
            Failure::CallFailed
        })?;
        let offer = offer.as_str().ok_or(Failure::CallFailed)?.to_string();
        let answer = self.context.calls.join(&id, offer).await.map_err(|err| {
            tracing::warn!(conversation_id = %id, error = %err, "the agent's call could not be placed");
            Failure::CallFailed
        })?;
        let accept = format!("window.__confab.accept({})", json!(answer));
        browser.page.eval(&accept, EVAL_TIMEOUT).await.map_err(|_| Failure::CallFailed)?;
        tracing::info!(conversation_id = %id, "meeting bot in the call");

        let mut alone_since: Option<Instant> = None;
        let mut failed_looks = 0;
        let mut last_record_check = Instant::now();
        let mut media = Value::Null;
        loop {
            tokio::time::sleep(POLL).await;
            if *self.stop.borrow() {
                return Ok(Departure::Shutdown);
            }
            if let Ok(now) = browser.page.eval("window.__confab.state()", EVAL_TIMEOUT).await
                && now != media
            {
                tracing::info!(conversation_id = %id, media = %now, "meeting bot's media");
                media = now;
            }
            match self.look(browser).await {
                Err(_) => {
                    failed_looks += 1;
                    if failed_looks >= 8 {
                        return Ok(Departure::BrowserLost);
                    }
                }
                Ok(Phase::Ended) => return Ok(Departure::MeetingEnded),
                Ok(Phase::Removed) | Ok(Phase::Refused) => return Ok(Departure::Removed),
                Ok(Phase::InCall { participants, speaker }) => {
                    failed_looks = 0;
                    speakers::set(&id, speaker);
                    if participants == 1 {
                        let since = *alone_since.get_or_insert_with(Instant::now);
                        if since.elapsed() >= self.settings.alone_timeout {
                            return Ok(Departure::Alone);
                        }
                    } else {
                        alone_since = None;
                    }
                }
                Ok(_) => failed_looks = 0,
            }
            if last_record_check.elapsed() >= Duration::from_secs(1) {
                last_record_check = Instant::now();
                if let Ok(Some(record)) = conversations::get(&self.context.db, &id).await
                    && record.status == STATUS_ENDED
                {
                    return Ok(Departure::CallEnded);
                }
            }
        }
    }

    /// Leaves after taking part: the reason is recorded, then the call is hung up (its `call_ended`).
    async fn leave(&self, departure: Departure) {
        let id = &self.job.conversation_id;
        if let Err(err) = confab_store::workers::set_end_reason(&self.context.db, id, departure.reason()).await {
            tracing::warn!(conversation_id = %id, error = %err, "could not record why the bot left");
        }
        self.hang_up().await;
        // A call that never got media still has to end.
        self.end_with(departure.reason()).await;
    }

    /// Hangs up the agent's call, if one was placed, and waits (briefly) for its record to read ENDED.
    async fn hang_up(&self) {
        let id = &self.job.conversation_id;
        if !matches!(self.context.calls.hang_up(id).await, Ok(true)) {
            return;
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            match conversations::get(&self.context.db, id).await {
                Ok(Some(record)) if record.status != STATUS_ENDED => tokio::time::sleep(POLL).await,
                _ => return,
            }
        }
    }

    /// Ends the conversation with `reason` (and `call_ended` queued) unless it has ended already.
    async fn end_with(&self, reason: &str) {
        let id = &self.job.conversation_id;
        match confab_store::workers::end_with_reason(&self.context.db, id, reason).await {
            Ok(_) => {
                if let Some(wake) = &self.settings.webhooks {
                    wake.notify_one();
                }
            }
            Err(err) => {
                tracing::error!(conversation_id = %id, error = %err, "could not end the meeting's conversation")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phases_are_read_from_the_driver() {
        assert_eq!(phase(&json!({"phase": "joining"})), Phase::PreJoin);
        assert_eq!(phase(&json!({"phase": "lobby"})), Phase::Lobby);
        assert_eq!(
            phase(&json!({"phase": "in_call", "participants": 3, "speaker": "Ada"})),
            Phase::InCall { participants: 3, speaker: Some("Ada".into()) }
        );
        assert_eq!(
            phase(&json!({"phase": "in_call", "speaker": ""})),
            Phase::InCall { participants: 0, speaker: None }
        );
        assert_eq!(phase(&json!({})), Phase::Loading);
    }
}
