//! ONNX Runtime, loaded dynamically from the models directory (the library of the pinned `onnxruntime`
//! wheel), once per process, with its telemetry off.

use std::path::Path;
use std::sync::OnceLock;

use ort::environment::Environment;
use ort::session::Session;
use ort::session::builder::GraphOptimizationLevel;

use crate::paths::ONNXRUNTIME_LIBRARY;
use crate::{ModelError, require};

static ENVIRONMENT: OnceLock<Result<Environment, String>> = OnceLock::new();

/// The variable that stops ONNX Runtime's telemetry.
pub const TELEMETRY_OFF_VARIABLE: &str = "ORT_DISABLE_TELEMETRY";

/// Turns ONNX Runtime's telemetry off for this process. The pinned Linux build (1.31) uploads usage events
/// over HTTPS (OneDS, `mobile.events.data.microsoft.com`) from the moment an environment exists, unless
/// `ORT_DISABLE_TELEMETRY` is set — the API's `DisableTelemetryEvents` (also called, below) does not stop
/// it. Sets that variable unless the operator set it.
///
/// # Safety
/// Sets an environment variable: call it before the process starts any other thread (first thing in
/// `main`). Tests and benchmarks get the variable from `.cargo/config.toml`.
pub unsafe fn disable_telemetry() {
    if std::env::var_os(TELEMETRY_OFF_VARIABLE).is_none() {
        // SAFETY: the caller guarantees no other thread runs yet.
        unsafe { std::env::set_var(TELEMETRY_OFF_VARIABLE, "1") };
    }
}

/// The process's ONNX Runtime environment, loading the library on first use.
pub fn environment(models_dir: &Path) -> Result<&'static Environment, ModelError> {
    let library = require(models_dir, ONNXRUNTIME_LIBRARY)?;
    let loaded = ENVIRONMENT.get_or_init(|| {
        // Microsoft's builds send telemetry unless told not to: an offline product makes no call it was not
        // asked to make.
        ort::init_from(&library)
            .map_err(|e| e.to_string())?
            .with_name("confab")
            .with_telemetry(false)
            .build()
            .map_err(|e| e.to_string())
    });
    loaded
        .as_ref()
        .map_err(|message| ModelError::Runtime { path: library.display().to_string(), message: message.clone() })
}

/// Loads a model with `intra_threads` threads for its operators and full graph optimisation. The operator
/// threads sleep between operators instead of spinning: every model here shares two or so cores with
/// others (speech-to-text, the language model, the voice, the faces), and a thread that spins waiting for
/// the next operator takes a core from the model the user is waiting on.
pub fn load_session(models_dir: &Path, stored_as: &str, intra_threads: usize) -> Result<Session, ModelError> {
    let environment = environment(models_dir)?;
    let path = require(models_dir, stored_as)?;
    let fail = |message: String| ModelError::Runtime { path: path.display().to_string(), message };
    Session::builder(environment)
        .map_err(|e| fail(e.to_string()))?
        .with_optimization_level(GraphOptimizationLevel::Level3)
        .map_err(|e| fail(e.to_string()))?
        .with_intra_threads(intra_threads)
        .map_err(|e| fail(e.to_string()))?
        .with_intra_op_spinning(false)
        .map_err(|e| fail(e.to_string()))?
        .with_inter_threads(1)
        .map_err(|e| fail(e.to_string()))?
        .commit_from_file(&path)
        .map_err(|e| fail(e.to_string()))
}
