//! The media worker's settings: how many calls, where WebRTC binds and what it advertises, which STUN/TURN
//! servers participants get, when a silent participant has left, where recordings go.

use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use confab_engine::providers::env::ProviderEnv;

use confab_calls::IceServers;

/// Calls one core holds at full quality with the default local models and face, where the CPU multiplies
/// the language model's int8 matrices with VNNI (AVX-512 VNNI or AVX-VNNI): every word heard and every
/// question answered right as in a call alone (`docs/scaling.md`, measured with the `call_load`
/// benchmark: 5 calls on 2 cores, 1.1 cores busy; the language model, one reply at a time, is what grows
/// the wait when they all ask at once).
pub const CALLS_PER_CORE: usize = 2;
/// The same on a CPU without VNNI (AVX2 alone): the language model was about 2.5× slower, and three calls
/// asking at once on 2 cores already left answers past 9 s (`call_load`, `docs/performance.md`). Both were
/// measured when the language model ran on candle (VNNI kernels where the CPU had them). On llama.cpp (the
/// same AVX2 kernels on both kinds of CPU) `call_load` on a VNNI host held six calls on 2 cores with every
/// word heard and every answer within 9 s (four: 2.47 s p50); the AVX2-only host kind, 1.6× slower at the
/// language model, was not measured again, so this default stays until it is.
pub const CALLS_PER_CORE_WITHOUT_VNNI: usize = 1;

/// Calls one core of this host holds: [`CALLS_PER_CORE`], or [`CALLS_PER_CORE_WITHOUT_VNNI`] on a CPU
/// without VNNI.
pub fn calls_per_core() -> usize {
    #[cfg(target_arch = "x86_64")]
    let vnni = std::arch::is_x86_feature_detected!("avx512vnni") || std::arch::is_x86_feature_detected!("avxvnni");
    #[cfg(not(target_arch = "x86_64"))]
    let vnni = false;
    if vnni { CALLS_PER_CORE } else { CALLS_PER_CORE_WITHOUT_VNNI }
}

/// Default for `--max-calls`: [`calls_per_core`] for each core this process may run on.
pub fn default_max_calls() -> usize {
    std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get) * calls_per_core()
}
/// Default for `--no-media-timeout`: a participant whose audio stops this long has left.
pub const DEFAULT_NO_MEDIA_TIMEOUT: Duration = Duration::from_secs(10);
#[derive(Debug, Clone)]
pub struct MediaConfig {
    pub models_dir: PathBuf,
    /// Calls held at once.
    pub max_calls: usize,
    /// The address WebRTC binds and advertises (host candidates); a wildcard means every interface.
    pub rtc_ip: IpAddr,
    /// Public addresses advertised instead of the bound one (a host behind 1:1 NAT).
    pub public_ips: Vec<IpAddr>,
    /// UDP ports calls may bind (inclusive); any free port when None.
    pub udp_ports: Option<(u16, u16)>,
    /// STUN/TURN server URLs (`stun:host:port`, `turn:host:port?transport=udp`).
    pub ice_servers: Vec<String>,
    pub ice_username: Option<String>,
    pub ice_credential: Option<String>,
    /// A participant whose audio stops this long (or never starts) has left.
    pub no_media_timeout: Duration,
    /// Where recordings are written (`<conversation id>.webm`).
    pub recordings_dir: PathBuf,
    /// Tools and guardrail callbacks may reach loopback and private addresses (`--allow-private-urls`).
    pub allow_private_urls: bool,
    /// The providers' endpoints and keys (`confab` reads them from its environment at start).
    pub providers: ProviderEnv,
}

impl MediaConfig {
    /// The STUN/TURN servers browsers are given.
    pub fn ice_servers(&self) -> IceServers {
        IceServers {
            urls: self.ice_servers.clone(),
            username: self.ice_username.clone(),
            credential: self.ice_credential.clone(),
        }
    }

    /// Settings on `rtc_ip` with `confab serve`'s defaults: 8 calls, any UDP port, no ICE servers, no
    /// public address, the default no-media timeout.
    pub fn new(rtc_ip: IpAddr, models_dir: PathBuf, recordings_dir: PathBuf) -> MediaConfig {
        MediaConfig {
            models_dir,
            max_calls: default_max_calls(),
            rtc_ip,
            public_ips: vec![],
            udp_ports: None,
            ice_servers: vec![],
            ice_username: None,
            ice_credential: None,
            no_media_timeout: DEFAULT_NO_MEDIA_TIMEOUT,
            recordings_dir,
            allow_private_urls: false,
            providers: ProviderEnv::default(),
        }
    }
}
