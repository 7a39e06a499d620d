#!/bin/sh
# Install the Debian/Ubuntu packages named in the file given (one a line), only those not installed
# yet. With every package already there it does nothing, and needs neither apt-get update nor a
# network: a platform image prepared in advance (or rebuilt offline) takes the bundle unchanged.
set -eu
list="$1"
missing=""
for package in $(cat "$list"); do
    if ! dpkg-query -W -f='${Status}\n' "$package" 2>/dev/null | grep -q '^install ok installed$'; then
        missing="$missing $package"
    fi
done
if [ -z "$missing" ]; then
    echo "grader: every package the grader needs is installed"
    exit 0
fi
echo "grader: installing$missing"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $missing
