//! Fetch-time conversions that need a Python package: a private virtual environment under the models
//! directory with exact pinned versions (wheels only), and a way to run its tools with their output on
//! stderr, so that stdout stays clean for callers that parse it.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// `onnx` and its dependencies, at the versions the graph edits were checked with.
pub const ONNX_TOOLS: &[&str] =
    &["onnx==1.23.2", "numpy==2.4.6", "protobuf==7.36.2", "ml_dtypes==0.6.0", "typing_extensions==4.16.0"];

/// Runs a fetch step that needs `packages`: `step` gets the Python of a fresh virtual environment named
/// `name` and a scratch directory (both under the models directory's `.tools`, removed afterwards,
/// whatever the outcome).
pub fn with_python(
    dir: &Path,
    name: &str,
    packages: &[&str],
    step: impl FnOnce(&Path, &Path) -> Result<(), String>,
) -> Result<(), String> {
    let tools = dir.join(".tools");
    let result = venv_with(&tools.join(name), packages, name).and_then(|python| step(&python, &tools));
    let _ = std::fs::remove_dir_all(&tools);
    result
}

/// A fresh virtual environment at `venv` with `packages` installed; its Python.
fn venv_with(venv: &Path, packages: &[&str], what: &str) -> Result<PathBuf, String> {
    run(Command::new("python3").args(["-m", "venv", "--clear"]).arg(venv), "python3 -m venv")?;
    let python = venv.join("bin").join("python");
    run(
        Command::new(&python)
            .args(["-m", "pip", "install", "--quiet", "--only-binary", ":all:", "--disable-pip-version-check"])
            .args(packages),
        &format!("pip install {what}"),
    )?;
    Ok(python)
}

/// Runs `command`, its output on stderr; an error naming `what` unless it succeeds.
pub fn run(command: &mut Command, what: &str) -> Result<(), String> {
    let status =
        command.stdout(Stdio::from(std::io::stderr())).status().map_err(|err| format!("cannot run {what}: {err}"))?;
    if status.success() { Ok(()) } else { Err(format!("{what} failed ({status})")) }
}
