#!/usr/bin/env bash
# Installs what Confab's build and tests need on a fresh Debian machine with the Rust toolchain.
# Idempotent: each step is skipped when its tool is already present.
set -euo pipefail

apt_packages=()
need() { # need COMMAND DEBIAN_PACKAGE
  command -v "$1" >/dev/null 2>&1 || apt_packages+=("$2")
}
need psql postgresql-client
need pkg-config pkg-config
need cmake cmake            # builds the bundled libopus
need espeak-ng espeak-ng    # speech fixtures for the tests; a local voice
need chromium chromium      # the join page's end-to-end tests (real browsers, fake microphones)
need firefox-esr firefox-esr
need ip iproute2            # loopback-only network namespaces for WebRTC tests
need unshare util-linux
need pulseaudio pulseaudio  # Firefox's sound device in the browser tests (a private null sink)
need pactl pulseaudio-utils
need ffprobe ffmpeg         # checks the avatar's WebM files in the tests
pkg-config --exists vpx 2>/dev/null || apt_packages+=(libvpx-dev)  # VP8 for the avatar's video

if ((${#apt_packages[@]})); then
  echo "setup: installing ${apt_packages[*]}" >&2
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${apt_packages[@]}"
fi
