#!/bin/sh
# SPDX-License-Identifier: MIT
# --level: walls (static elements, qg_set_static) that the agents bounce off
# when an agent-wall overlap begins (qg_pair_events). The run writes its
# picture and JSON line; the walls are in the picture in their own colour;
# agents bounced; and every kind drives the very same frames as brute_force
# (events exact for every kind, on one thread or several).
. "$(dirname "$0")/common.sh"
"$SIM" --level --agents 20000 --frames 60 --png "$TMP/level.png" --json > "$TMP/level.json" 2> "$TMP/level.err" ||
    fail "--level failed: $(cat "$TMP/level.err")"
[ "$(wc -l < "$TMP/level.json")" -eq 1 ] || fail "--json printed more than one line"
field() { sed -n "s/.*\"$1\":\\([^,}]*\\).*/\\1/p" "$TMP/level.json"; }
[ "$(field level)" = true ] || fail "JSON says level $(field level): $(cat "$TMP/level.json")"
[ "$(field frames)" = 60 ] || fail "JSON says $(field frames) frames"
walls=$(field walls) bounces=$(field wall_bounces)
# 40% of the 141 x 141 tiles of a 20,000-agent world: about 7,950.
[ "$walls" -gt 7000 ] && [ "$walls" -lt 9000 ] || fail "$walls walls, expected about 7950"
[ "$bounces" -gt 1000 ] || fail "only $bounces wall bounces in 60 frames"
# Walls in RASTER_WALL (3c4454) over about 40% of the world (the world is the
# whole picture; agents are drawn over the free 60%).
"$PNGCHECK" "$TMP/level.png" 6 5 3c4454 30
# Without --level: no walls.
"$SIM" --agents 2000 --frames 5 --json > "$TMP/plain.json" 2>/dev/null
grep -q '"level":false,"walls":0,"wall_bounces":0' "$TMP/plain.json" || fail "plain run: $(cat "$TMP/plain.json")"
# Determinism: every kind, every frame, bit for bit the brute-force frames.
kinds=$("$SIM" --list-kinds | awk '$3 == "built" { print $2 }')
lf=$(scaled 150 30)
"$SIM" --level --kind brute_force --agents 1500 --frames "$lf" --threads 1 --hash-log "$TMP/ref.log" --quiet
[ "$(wc -l < "$TMP/ref.log")" -eq "$lf" ] || fail "hash log has not $lf lines"
for k in $kinds; do
    [ "$k" != brute_force ] || continue
    "$SIM" --level --kind "$k" --agents 1500 --frames "$lf" --threads 2 --hash-log "$TMP/$k.log" --quiet
    if ! cmp -s "$TMP/ref.log" "$TMP/$k.log"; then
        diff "$TMP/ref.log" "$TMP/$k.log" | head -5
        fail "level: $k differs from brute_force"
    fi
    echo "level: $k == brute_force over $lf frames of 1500 agents"
done
# A short video of the level, when ffmpeg is there.
if command -v ffmpeg > /dev/null 2>&1 && command -v ffprobe > /dev/null 2>&1; then
    "$SIM" --level --agents 3000 --frames 10 --size 256 --video "$TMP/level.mp4" --quiet
    n=$(ffprobe -v error -count_frames -select_streams v:0 -show_entries stream=nb_read_frames \
        -of csv=p=0 "$TMP/level.mp4")
    [ "$n" = 10 ] || fail "ffprobe reads $n frames of the level video, expected 10"
fi
# The window (SDL2 under Xvfb, when both are there): the level drawn, its
# walls in their colour, through a kind switch, added agents and a dragon.
if command -v Xvfb > /dev/null 2>&1 && command -v xdotool > /dev/null 2>&1 &&
    ! env -u DISPLAY "$SIM" --view --frames 1 2>&1 | grep -q "without SDL2"; then
    d=99
    while [ -e "/tmp/.X11-unix/X$d" ] || [ -e "/tmp/.X$d-lock" ]; do d=$((d + 1)); done
    Xvfb ":$d" -screen 0 800x600x24 -nolisten tcp > "$TMP/xvfb.log" 2>&1 &
    xvfb=$!
    trap 'kill "$xvfb" 2>/dev/null; wait 2>/dev/null; rm -rf "$TMP"' EXIT
    i=0
    while ! DISPLAY=":$d" xdotool getmouselocation > /dev/null 2>&1; do
        i=$((i + 1))
        [ $i -lt 100 ] || fail "Xvfb did not start: $(cat "$TMP/xvfb.log")"
        sleep 0.1
    done
    DISPLAY=":$d" ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" SDL_AUDIODRIVER=dummy \
        "$SIM" --view --level --agents 5000 --size 400x400 --frames 240 --screenshot "$TMP/view.png" \
        --screenshot-frame 200 > "$TMP/view.log" 2>&1 &
    sim=$!
    win=$(DISPLAY=":$d" timeout 30 xdotool search --sync --onlyvisible --name quadgrid-sim | head -n 1) || true
    [ -n "$win" ] || fail "no quadgrid-sim window: $(cat "$TMP/view.log")"
    for key in 1 plus minus; do
        DISPLAY=":$d" xdotool key --window "$win" "$key"
        sleep 0.2
    done
    DISPLAY=":$d" xdotool mousemove --window "$win" 200 200 click 1
    wait "$sim" || fail "quadgrid-sim --view --level failed: $(cat "$TMP/view.log")"
    [ -f "$TMP/view.png" ] || fail "no --screenshot written: $(cat "$TMP/view.log")"
    "$PNGCHECK" "$TMP/view.png" 6 5 3c4454 25
fi
echo "level ok"
