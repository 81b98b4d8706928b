//! Runs a test inside a network namespace that reaches nothing outside itself (TESTING.md's network
//! rule): the test re-executes its own binary under `unshare -n`, so the server, the browser and the
//! test's receivers all share that namespace. It holds loopback and one veth pair whose two ends are both
//! inside it (10.99.0.1 and 10.99.0.2, no default route): Firefox gathers no ICE candidates on a host
//! whose only interface is loopback, so it needs an ordinary interface that still leads nowhere.

use std::process::Command;

const MARKER: &str = "CONFAB_TEST_IN_NETNS";
const NAMESPACE_SETUP: &str = "ip link set lo up \
    && ip link add confab0 type veth peer name confab1 \
    && ip addr add 10.99.0.1/24 dev confab0 && ip addr add 10.99.0.2/24 dev confab1 \
    && ip link set confab0 up && ip link set confab1 up \
    && ip route add default via 10.99.0.2 dev confab0 \
    && exec \"$0\" \"$@\"";

/// Returns true when already inside the namespace (run the test body); otherwise runs `test_name` of this
/// binary inside one, asserts that it passed, and returns false.
pub fn enter_loopback_only(test_name: &str) -> bool {
    if std::env::var_os(MARKER).is_some() {
        return true;
    }
    let exe = std::env::current_exe().expect("the test binary has a path");
    let status = Command::new("unshare")
        .args(["--net", "sh", "-c", NAMESPACE_SETUP])
        .arg(exe)
        .args(["--exact", test_name, "--nocapture", "--test-threads=1"])
        .env(MARKER, "1")
        .status()
        .expect("unshare (util-linux) runs; the tests need root or user namespaces");
    assert!(status.success(), "{test_name} failed inside its network namespace");
    false
}
