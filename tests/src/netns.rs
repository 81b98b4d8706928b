//! Runs a test inside a network namespace that has only loopback (TESTING.md's network rule): the test
//! re-executes its own binary under `unshare -n`, so the server, the browser and the test's receivers
//! all share that namespace and nothing can reach another interface.

use std::process::Command;

const MARKER: &str = "CONFAB_TEST_IN_NETNS";

/// Returns true when already inside the namespace (run the test body); otherwise runs `test_name` of this
/// binary inside one, asserts that it passed, and returns false.
pub fn enter_loopback_only(test_name: &str) -> bool {
    if std::env::var_os(MARKER).is_some() {
        return true;
    }
    let exe = std::env::current_exe().expect("the test binary has a path");
    let status = Command::new("unshare")
        .args(["--net", "sh", "-c", "ip link set lo up && exec \"$0\" \"$@\""])
        .arg(exe)
        .args(["--exact", test_name, "--nocapture", "--test-threads=1"])
        .env(MARKER, "1")
        .status()
        .expect("unshare (util-linux) runs; the tests need root or user namespaces");
    assert!(status.success(), "{test_name} failed inside its network namespace");
    false
}
