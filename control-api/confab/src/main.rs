//! The `confab` binary: `serve`, `worker`, `keys`, `models fetch`, `simulate`.

mod admin;
mod cli;
mod first_start;
mod media;
mod serve;
mod simulate_stored;
mod worker;

use anyhow::Context;
use clap::Parser;
use confab_store::{self as store, Db};

use crate::cli::{Cli, Command, DatabaseArgs, ModelsCommand};

async fn open_database(args: &DatabaseArgs) -> anyhow::Result<Db> {
    let url = store::resolve_url(args.database_url.as_deref(), &args.data)?;
    Db::connect(&url).await.context("cannot open the database")
}

fn main() -> anyhow::Result<()> {
    // SAFETY: first thing in the process, before the runtime or anything else starts a thread.
    unsafe { confab_models::onnx::disable_telemetry() };
    tokio::runtime::Builder::new_multi_thread().enable_all().build()?.block_on(run())
}

async fn run() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| confab_worker::DEFAULT_LOG_FILTER.into()),
        )
        .with_writer(std::io::stderr)
        // Colours for a terminal only: a log file or a collector gets plain text.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    match Cli::parse().command {
        Command::Serve(args) => serve::serve(*args).await,
        Command::Worker(args) => worker::worker(*args).await,
        Command::Keys { command } => admin::keys(command).await,
        Command::Models { command: ModelsCommand::Fetch { dir } } => admin::fetch_models(dir),
        Command::Simulate {
            agent,
            agent_id,
            database,
            allow_private_urls,
            input,
            out,
            realtime,
            models_dir,
            local_llm,
            endpoints,
            model_dirs,
        } => {
            let models_dir = models_dir.unwrap_or_else(confab_models::default_models_dir);
            media::use_local_llm(&models_dir, local_llm.as_deref(), &model_dirs.dirs)?;
            let options = confab_engine::simulate::SimulateOptions {
                agent: agent.unwrap_or_default(),
                input,
                out_dir: out,
                realtime,
                models_dir,
                allow_private_urls,
                providers: media::provider_env(&endpoints, allow_private_urls)?,
                custom_face: None,
            };
            if let Some(agent_id) = agent_id {
                let db = open_database(&database).await?;
                crate::simulate_stored::run(db, &agent_id, options).await?;
                return Ok(());
            }
            // The engine drives its own threads and I/O runtime; keep it off this async runtime.
            std::thread::Builder::new()
                .name("confab-simulate".into())
                .spawn(move || confab_engine::simulate::run(&options, &mut std::io::stdout().lock()).map(|_| ()))?
                .join()
                .map_err(|_| anyhow::anyhow!("the simulation thread panicked"))??;
            Ok(())
        }
    }
}

async fn shutdown_signal() {
    let interrupt = async { tokio::signal::ctrl_c().await.ok() };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        _ = interrupt => {},
        _ = terminate => {},
    }
    tracing::info!("shutting down");
}
