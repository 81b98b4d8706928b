//! External meetings: the agent joins a Google Meet, Zoom or Microsoft Teams meeting through a browser it
//! drives. `platform` recognises the meeting URL, `platforms` holds one adapter (selectors and texts) per
//! platform, `browser` and `cdp` run Chromium, `bot` takes one meeting from request to goodbye with
//! `driver.js` (the join flow) and `bridge.js` (the media) installed in the page (the speaker it reports
//! goes into the transcript through `confab_store::meeting_speakers`). See docs/meetings.md.

pub mod bot;
pub mod browser;
pub mod cdp;
pub mod platform;
pub mod platforms;

use confab_engine::lock::lock;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::{Notify, watch};

pub use browser::BrowserConfig;
pub use platform::Platform;

use confab_calls::CallPlacer;
use confab_store::Db;

pub const DRIVER_JS: &str = include_str!("driver.js");
pub const BRIDGE_JS: &str = include_str!("bridge.js");

/// Default for `--meeting-lobby-timeout`: longest wait to be admitted.
pub const DEFAULT_LOBBY_TIMEOUT: Duration = Duration::from_secs(90);
/// Default for `--meeting-alone-timeout`: the bot leaves after being the only participant this long.
pub const DEFAULT_ALONE_TIMEOUT: Duration = Duration::from_secs(60);
/// The page must show its pre-join screen (or the call) this soon after loading.
pub const JOIN_TIMEOUT: Duration = Duration::from_secs(25);

/// What a bot needs of the process that sends it: the records, and where its call is placed.
#[derive(Clone)]
pub struct BotContext {
    pub db: Db,
    pub calls: Arc<dyn CallPlacer>,
}

#[derive(Debug, Clone)]
pub struct MeetingSettings {
    pub browser: BrowserConfig,
    pub lobby_timeout: Duration,
    pub alone_timeout: Duration,
    pub join_timeout: Duration,
    /// Wakes the webhook deliverer when a bot ended its conversation itself.
    pub webhooks: Option<Arc<Notify>>,
}

impl MeetingSettings {
    pub fn new(browser: BrowserConfig) -> MeetingSettings {
        MeetingSettings {
            browser,
            lobby_timeout: DEFAULT_LOBBY_TIMEOUT,
            alone_timeout: DEFAULT_ALONE_TIMEOUT,
            join_timeout: JOIN_TIMEOUT,
            webhooks: None,
        }
    }
}

/// A meeting to attend.
#[derive(Debug, Clone)]
pub struct MeetingJob {
    pub conversation_id: String,
    pub platform: Platform,
    pub join_url: String,
    pub display_name: String,
    pub email: Option<String>,
}

/// The meeting bots of this process.
pub struct MeetingBots {
    settings: MeetingSettings,
    /// Bots at most at once (each holds a browser and, once admitted, a media session).
    max_bots: usize,
    active: Arc<AtomicUsize>,
    stop: watch::Sender<bool>,
    running: std::sync::Mutex<tokio::task::JoinSet<()>>,
}

impl MeetingBots {
    pub fn new(settings: MeetingSettings, max_bots: usize) -> Arc<MeetingBots> {
        Arc::new(MeetingBots {
            settings,
            max_bots,
            active: Arc::new(AtomicUsize::new(0)),
            stop: watch::Sender::new(false),
            running: Default::default(),
        })
    }

    /// Bots in meetings (or on their way in).
    pub fn active(&self) -> usize {
        self.active.load(Ordering::SeqCst)
    }

    /// Takes a slot for one more bot; false when every slot is taken (or the server is stopping).
    pub fn reserve(&self) -> bool {
        if *self.stop.borrow() {
            return false;
        }
        self.active.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| (n < self.max_bots).then_some(n + 1)).is_ok()
    }

    /// Gives back a slot `reserve` took for a bot that was not sent.
    pub fn release(&self) {
        self.active.fetch_sub(1, Ordering::SeqCst);
    }

    /// Sends a bot (after `reserve`) into `job`'s meeting.
    pub fn send(&self, context: BotContext, job: MeetingJob) {
        let bot = bot::Bot::new(context, self.settings.clone(), job, self.stop.subscribe());
        let active = self.active.clone();
        let mut running = lock(&self.running);
        // Bots that have left are forgotten here: a server up for days keeps only the ones in meetings.
        while running.try_join_next().is_some() {}
        running.spawn(async move {
            bot.run().await;
            active.fetch_sub(1, Ordering::SeqCst);
        });
    }

    /// Every bot leaves its meeting (its call ends cleanly); waits for them, at most `grace`.
    pub async fn shutdown(&self, grace: Duration) {
        self.stop.send_replace(true);
        let mut running = std::mem::take(&mut *lock(&self.running));
        if running.is_empty() {
            return;
        }
        tracing::info!(bots = running.len(), "meeting bots leaving");
        if tokio::time::timeout(grace, async { while running.join_next().await.is_some() {} }).await.is_err() {
            tracing::warn!("meeting bots did not leave within the shutdown grace period");
        }
    }
}
