#!/bin/sh
# SPDX-License-Identifier: MIT
# Determinism across kinds: pairs are sorted before the response, so every
# kind must resolve the same collisions in the same order as brute_force and
# end every frame with bit-identical agents. Comparing brute_force with
# itself checks that a run repeats exactly. The reference runs on one
# thread, the kinds with the default (every core) or --threads 3: the
# parallel calls must give the very same frames.
. "$(dirname "$0")/common.sh"
kinds=$("$SIM" --list-kinds | awk '$3 == "built" { print $2 }')
echo "$kinds" | grep -qx brute_force || skip "brute_force is not built"
check() { # label, agents, frames (times QG_TEST_SCALE, at least 30), extra options
    label=$1 agents=$2 frames=$(scaled "$3" 30)
    shift 3
    "$SIM" --kind brute_force --agents "$agents" --frames "$frames" --hash-log "$TMP/ref.log" \
        --quiet "$@" --threads 1
    [ "$(wc -l < "$TMP/ref.log")" -eq "$frames" ] || fail "hash log has not $frames lines"
    # Pairs were found and resolved: most frames have some.
    awk -v f="$frames" '$2 > 0 { n++ } END { exit !(n > f / 2) }' "$TMP/ref.log" ||
        fail "$label: too few frames with pairs"
    for k in $kinds; do
        [ "$k" != brute_force ] || [ "$label" = uniform ] || continue
        "$SIM" --kind "$k" --agents "$agents" --frames "$frames" --hash-log "$TMP/$k.log" \
            --quiet "$@"
        if ! cmp -s "$TMP/ref.log" "$TMP/$k.log"; then
            diff "$TMP/ref.log" "$TMP/$k.log" | head -5
            fail "$label: $k differs from brute_force"
        fi
        echo "$label: $k == brute_force over $frames frames of $agents agents"
    done
}
check uniform 2000 200
check dragons 1000 150 --dragons 3
check spot 1000 150 --start spot
check workload-order 1000 100 --workload-order
check threads-3 1000 100 --threads 3 --dragons 2
echo "determinism ok"
