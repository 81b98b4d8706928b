#!/usr/bin/env bash
# Runs every fuzz target (fuzz/fuzz_targets) for SECONDS each (default 600), one after another, with
# libFuzzer through cargo-fuzz. Usage: scripts/fuzz.sh [SECONDS] [TARGET...]
# Seeds come from fuzz/seeds/<target>; the growing corpus lives in $CONFAB_FUZZ_DIR/corpus/<target>
# (default /var/tmp/confab-fuzz) and crashes in $CONFAB_FUZZ_DIR/artifacts/<target>. A crash stops the run
# with libFuzzer's report; keep its input as a regression test (docs/fuzzing.md).
# cargo-fuzz needs nightly flags (-Z sanitizer): RUSTC_BOOTSTRAP=1 lets the stable toolchain take them.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-600}"
shift || true
fuzz_dir="${CONFAB_FUZZ_DIR:-/var/tmp/confab-fuzz}"
if ! cargo fuzz --version 2>/dev/null | grep -q '0.13.2'; then
  cargo install cargo-fuzz --version 0.13.2 --locked
fi
export RUSTC_BOOTSTRAP=1
targets=("$@")
if [ "${#targets[@]}" -eq 0 ]; then
  mapfile -t targets < <(cargo fuzz list --fuzz-dir fuzz)
fi
cargo fuzz build --fuzz-dir fuzz -O --debug-assertions
for target in "${targets[@]}"; do
  corpus="$fuzz_dir/corpus/$target"
  artifacts="$fuzz_dir/artifacts/$target"
  mkdir -p "$corpus" "$artifacts"
  seeds=()
  if [ -d "fuzz/seeds/$target" ]; then seeds=("fuzz/seeds/$target"); fi
  echo "fuzz: $target for ${seconds}s"
  cargo fuzz run --fuzz-dir fuzz -O --debug-assertions "$target" "$corpus" "${seeds[@]}" -- \
    -max_total_time="$seconds" -artifact_prefix="$artifacts/" -print_final_stats=1 2>&1 \
    | grep -E '^(#[0-9]+ +DONE|stat::|==[0-9]+==|SUMMARY|Done|thread|panicked|artifact_prefix|Test unit)' || true
  if ls "$artifacts"/crash-* >/dev/null 2>&1; then
    echo "fuzz: $target crashed; inputs in $artifacts" >&2
    exit 1
  fi
done
