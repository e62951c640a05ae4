#!/bin/sh
# SPDX-License-Identifier: MIT
# Installs the Debian packages named as arguments that are not installed yet.
# Usage: scripts/deps.sh PKG...
# Does nothing when all are present; otherwise apt-get update + install -y,
# through sudo when not root. Off Debian it only says what it wanted.
set -eu

[ "$#" -gt 0 ] || exit 0

if ! command -v dpkg > /dev/null 2>&1; then
    echo "deps.sh: not a Debian system; make sure these are installed: $*" >&2
    exit 0
fi

missing=""
for p in "$@"; do
    # "install ok installed" only: a removed package leaves a config-files entry.
    if ! dpkg-query -W -f='${Status}' "$p" 2> /dev/null | grep -q "ok installed"; then
        missing="$missing $p"
    fi
done
[ -n "$missing" ] || exit 0

sudo=""
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo > /dev/null 2>&1; then
        sudo="sudo"
    else
        echo "deps.sh: need root (or sudo) to install:$missing" >&2
        exit 1
    fi
fi

echo "deps.sh: installing$missing"
export DEBIAN_FRONTEND=noninteractive
$sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq
# shellcheck disable=SC2086 # the list is meant to split
$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing
