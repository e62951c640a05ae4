#!/bin/sh
# SPDX-License-Identifier: MIT
# --video out.mp4 --frames 120 gives a video ffprobe reads as 120 frames.
. "$(dirname "$0")/common.sh"
command -v ffmpeg >/dev/null 2>&1 || skip "ffmpeg is not installed (apt-get install ffmpeg)"
command -v ffprobe >/dev/null 2>&1 || skip "ffprobe is not installed (apt-get install ffmpeg)"
"$SIM" --agents 5000 --frames 120 --size 320 --cells --video "$TMP/out.mp4" --quiet
n=$(ffprobe -v error -count_frames -select_streams v:0 -show_entries stream=nb_read_frames \
    -of csv=p=0 "$TMP/out.mp4")
[ "$n" = 120 ] || fail "ffprobe reads $n frames, expected 120"
"$SIM" --agents 2000 --frames 12 --size 128 --video "$TMP/out.gif" --quiet
n=$(ffprobe -v error -count_frames -select_streams v:0 -show_entries stream=nb_read_frames \
    -of csv=p=0 "$TMP/out.gif")
[ "$n" = 12 ] || fail "ffprobe reads $n gif frames, expected 12"
# Without ffmpeg on PATH: a clear message and a failure, not a crash.
if PATH=/nonexistent "$SIM" --agents 100 --frames 2 --video "$TMP/x.mp4" > "$TMP/err" 2>&1; then
    fail "--video without ffmpeg succeeded"
fi
grep -q "needs ffmpeg" "$TMP/err" || fail "no clear message without ffmpeg: $(cat "$TMP/err")"
echo "video ok"
