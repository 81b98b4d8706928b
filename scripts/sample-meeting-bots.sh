#!/usr/bin/env bash
# Samples the meeting bots' browsers once a second (docs/performance.md "External meetings"): for every
# process marked CONFAB_MEETING_BOT (a bot's browser and its crash handlers), its whole process group.
# Prints: unix time, processes, PSS in MiB, cumulative CPU ticks (CLK_TCK per second). Stop with Ctrl-C.
set -uo pipefail
while true; do
  groups="" marked=""
  for p in $(ls /proc | grep -E '^[0-9]+$'); do
    if tr '\0' '\n' < "/proc/$p/environ" 2>/dev/null | grep -q '^CONFAB_MEETING_BOT='; then
      marked="$marked $p"
      groups="$groups $(ps -o pgid= -p "$p" 2>/dev/null | tr -d ' ')"
    fi
  done
  pids=$( (for g in $groups; do pgrep -g "$g"; done; for m in $marked; do echo "$m"; done) 2>/dev/null | sort -u)
  pss=0 ticks=0 n=0
  for p in $pids; do
    k=$(awk '/^Pss:/{print $2}' "/proc/$p/smaps_rollup" 2>/dev/null)
    [ -n "$k" ] || continue
    t=$(awk '{print $14 + $15}' "/proc/$p/stat" 2>/dev/null)
    n=$((n + 1)) pss=$((pss + k)) ticks=$((ticks + ${t:-0}))
  done
  echo "$(date +%s) $n $((pss / 1024)) $ticks"
  sleep 1
done
