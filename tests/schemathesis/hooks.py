"""Schemathesis hooks for Confab's OpenAPI conformance test (tests/tests/openapi_conformance.rs).

The WebRTC offer (`POST /v1/session/conversation/{id}/webrtc`) is an `application/sdp` body: text, which
schemathesis has no serializer for by default; send it as UTF-8 like `text/plain`.
"""

import schemathesis

schemathesis.serializer.alias("application/sdp", "text/plain")
