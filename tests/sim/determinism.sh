#!/bin/sh
# Determinism across kinds: pairs are sorted before the response, so every
# kind must resolve the same collisions in the same order as brute_force and
# end every frame with bit-identical agents. Also: the same run twice is the same.
. "$(dirname "$0")/common.sh"
kinds=$("$SIM" --list-kinds | awk '$3 == "built" { print $2 }')
echo "$kinds" | grep -qx brute_force || skip "brute_force is not built"
check() { # label, extra options
    label=$1
    shift
    "$SIM" --kind brute_force --agents 2000 --frames 200 --hash-log "$TMP/ref.log" --quiet "$@"
    [ "$(wc -l < "$TMP/ref.log")" -eq 200 ] || fail "hash log has not 200 lines"
    for k in $kinds; do
        "$SIM" --kind "$k" --agents 2000 --frames 200 --hash-log "$TMP/$k.log" --quiet "$@"
        if ! cmp -s "$TMP/ref.log" "$TMP/$k.log"; then
            diff "$TMP/ref.log" "$TMP/$k.log" | head -5
            fail "$label: $k differs from brute_force"
        fi
        echo "$label: $k == brute_force over 200 frames"
    done
}
check uniform
check dragons --dragons 4
check spot --start spot --agents 1500
# Pairs were found and resolved: the log's pair counts are not all zero.
awk '$2 > 0 { n++ } END { exit !(n > 100) }' "$TMP/ref.log" || fail "too few frames with pairs"
echo "determinism ok"
