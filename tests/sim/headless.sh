#!/bin/sh
# SPDX-License-Identifier: MIT
# --view without a display: a clear message and exit code 2, no crash.
. "$(dirname "$0")/common.sh"
set +e
env -u DISPLAY -u WAYLAND_DISPLAY -u SDL_VIDEODRIVER "$SIM" --view --agents 1000 --frames 5 \
    > "$TMP/out" 2>&1
rc=$?
set -e
cat "$TMP/out"
[ "$rc" -eq 2 ] || fail "exit code $rc, expected 2"
grep -qi "display\|without SDL2\|no window" "$TMP/out" || fail "no clear message"
echo "headless ok"
