#!/bin/sh
# SPDX-License-Identifier: MIT
# --view under Xvfb: the window opens, takes keys, and shows agents. Checked
# two ways: the sim's own --screenshot, and a capture of the X screen.
. "$(dirname "$0")/common.sh"
command -v Xvfb >/dev/null 2>&1 || skip "Xvfb is not installed (apt-get install xvfb)"
command -v xdotool >/dev/null 2>&1 || skip "xdotool is not installed (apt-get install xdotool)"
if env -u DISPLAY "$SIM" --view --frames 1 2>&1 | grep -q "without SDL2"; then
    skip "quadgrid-sim was built without SDL2"
fi
# A free display number.
d=99
while [ -e "/tmp/.X11-unix/X$d" ] || [ -e "/tmp/.X$d-lock" ]; do d=$((d + 1)); done
Xvfb ":$d" -screen 0 1024x768x24 -nolisten tcp > "$TMP/xvfb.log" 2>&1 &
xvfb=$!
sim=
cleanup() {
    [ -n "$sim" ] && kill "$sim" 2>/dev/null
    kill "$xvfb" 2>/dev/null
    wait 2>/dev/null
    rm -rf "$TMP"
}
trap cleanup EXIT
export DISPLAY=":$d"
i=0
while ! xdotool getmouselocation > /dev/null 2>&1; do
    i=$((i + 1))
    [ $i -lt 100 ] || fail "Xvfb did not start: $(cat "$TMP/xvfb.log")"
    sleep 0.1
done
# Under a leak checker (CI's ASan stage) the X11/GL driver libraries SDL
# loads report their own never-freed globals; ours are checked by the other
# sim tests.
ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" SDL_AUDIODRIVER=dummy "$SIM" --view --agents 20000 --size 640x480 --frames 400 \
    --screenshot "$TMP/shot.png" --screenshot-frame 150 > "$TMP/sim.log" 2>&1 &
sim=$!
win=$(timeout 30 xdotool search --sync --onlyvisible --name quadgrid-sim | head -n 1) || true
[ -n "$win" ] || fail "no quadgrid-sim window: $(cat "$TMP/sim.log")"
# Cells on, pause and go on, switch to kind 1 (quadtree: always built), add agents,
# zoom with the wheel, and click to spawn a dragon.
for key in c space space 1 plus; do
    xdotool key --window "$win" "$key"
    sleep 0.2
done
xdotool mousemove --window "$win" 320 240 click 4 sleep 0.2 click 1
# The probe: a right-button drag casts a ray and finds the nearest agents.
xdotool mousemove --window "$win" 200 200 sleep 0.1 mousedown 3 sleep 0.1 \
    mousemove --window "$win" 420 330 sleep 0.1 mouseup 3
sleep 0.5
if command -v import >/dev/null 2>&1; then
    import -window root "$TMP/screen.png"
    if [ -n "${PNGCHECK:-}" ]; then "$PNGCHECK" "$TMP/screen.png" 6 5; fi
else
    echo "ImageMagick import not installed: checking the sim's own screenshot only"
fi
wait "$sim" || { sim=; fail "quadgrid-sim --view failed: $(cat "$TMP/sim.log")"; }
sim=
cat "$TMP/sim.log"
[ -f "$TMP/shot.png" ] || fail "no --screenshot written"
# 20,000 agents around the probe's point: its 8 nearest are always found.
grep -q "^probe: ray .* 8 nearest: first [0-9]" "$TMP/sim.log" || fail "the probe did not answer: $(cat "$TMP/sim.log")"
if [ -n "${PNGCHECK:-}" ]; then "$PNGCHECK" "$TMP/shot.png" 6 5; fi
echo "view ok"
