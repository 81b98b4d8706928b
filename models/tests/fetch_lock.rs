//! Two `confab models fetch` runs into one directory take turns: the second waits for the first's lock,
//! then finds everything stored. The directory here links to the already fetched models (the test makes
//! no download; `confab models fetch` runs before the tests).

use std::io::Write;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use confab_models::fetch::{LOCK_FILE, fetch_all};
use confab_models::registry::PACKAGES;

/// What a fetch reports, told to a test waiting for a line.
#[derive(Clone, Default)]
struct Progress(Arc<(Mutex<Vec<u8>>, Condvar)>);

impl Progress {
    fn text(&self) -> String {
        String::from_utf8(self.0.0.lock().unwrap().clone()).unwrap()
    }

    /// Waits (10 s at most) until the report contains `line`.
    fn wait_for(&self, line: &str) {
        let (written, told) = &*self.0;
        let guard = written.lock().unwrap();
        let waiting = |bytes: &mut Vec<u8>| !String::from_utf8_lossy(bytes).contains(line);
        let _ = told.wait_timeout_while(guard, Duration::from_secs(10), waiting).unwrap();
    }
}

impl Write for Progress {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.0.lock().unwrap().extend_from_slice(bytes);
        self.0.1.notify_all();
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn a_second_fetch_waits_for_the_first() {
    let models = confab_models::default_models_dir();
    let dir = tempfile::tempdir().unwrap();
    for package in PACKAGES {
        let outputs = package.prepare.map(|p| p.outputs.to_vec()).unwrap_or_default();
        for stored in package.files.iter().map(|f| f.stored_as).chain(outputs) {
            let (from, to) = (models.join(stored), dir.path().join(stored));
            assert!(from.exists(), "{} is missing: run `confab models fetch`", from.display());
            std::fs::create_dir_all(to.parent().unwrap()).unwrap();
            std::os::unix::fs::symlink(&from, &to).unwrap();
        }
    }
    // Another fetch holds the lock.
    let held =
        std::fs::OpenOptions::new().create(true).truncate(false).write(true).open(dir.path().join(LOCK_FILE)).unwrap();
    held.lock().unwrap();
    let progress = Progress::default();
    let second = {
        let (dir, mut progress) = (dir.path().to_path_buf(), progress.clone());
        std::thread::spawn(move || fetch_all(&dir, &mut progress).unwrap())
    };
    let text = || progress.text();
    progress.wait_for("waiting for another `confab models fetch`");
    assert!(text().starts_with("waiting for another"), "{}", text());
    assert!(!second.is_finished(), "it waits while the lock is held");
    assert_eq!(text().lines().count(), 1, "nothing checked or stored while waiting: {}", text());
    held.unlock().unwrap();
    let report = second.join().unwrap();
    assert_eq!(report.already_present.len(), PACKAGES.len(), "{}", text());
    assert!(report.downloaded.is_empty());
}
