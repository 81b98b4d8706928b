#!/usr/bin/env bash
# Sends an agent into a real meeting and follows its conversation until it ends (docs/meetings.md):
#   scripts/check-meeting.sh BASE_URL API_KEY AGENT_ID MEETING_URL [DISPLAY_NAME]
set -euo pipefail
if [ $# -lt 4 ]; then
  echo "usage: $0 BASE_URL API_KEY AGENT_ID MEETING_URL [DISPLAY_NAME]" >&2
  exit 2
fi
base="${1%/}" key="$2" agent="$3" url="$4" name="${5:-Confab Check}"
body=$(python3 -c 'import json,sys; print(json.dumps({"agent_id": sys.argv[1], "meeting_url": sys.argv[2],
  "user_name": sys.argv[3], "user_id": "meeting-check"}))' "$agent" "$url" "$name")
headers=$(mktemp)
trap 'rm -f "$headers"' EXIT
answer=$(curl -sS -D "$headers" -X POST "$base/v1/ext/externalmeeting" -H "x-api-key: $key" \
  -H 'content-type: application/json' -d "$body")
echo "answer: $answer"
id=$(grep -i '^x-conversation-id:' "$headers" | tr -d '\r' | awk '{print $2}')
if [ -z "$id" ]; then
  echo "no conversation was created" >&2
  exit 1
fi
echo "conversation: $id — admit \"$name\" in the meeting, then ask it something"
while true; do
  record=$(curl -sS "$base/v1/ext/conversation/$id" -H "x-api-key: $key")
  python3 -c 'import json,sys
r = json.loads(sys.argv[1])
print("status:", r.get("status"), "| end_reason:", r.get("end_reason", "-"))
for t in r.get("transcript", [])[-4:]:
    print("   ", t.get("speaker") or t["role"], ":", t["content"])' "$record"
  if echo "$record" | grep -q '"status":"ENDED"'; then
    break
  fi
  sleep 5
done
