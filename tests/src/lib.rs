//! End-to-end tests that run the real `confab` binary; the tests live in `tests/`.
