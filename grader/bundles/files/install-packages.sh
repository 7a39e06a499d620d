#!/bin/sh
# install-packages.sh LIST [PROJECT]
# Install the Debian/Ubuntu packages named in LIST (one a line), only those not installed yet; then,
# where /usr/bin/python3's own copy of a package the grading imports is missing or older than the
# grader needs (check-python.sh says which; Ubuntu 22.04's pytest is), the version the grader pins,
# with pip, into python-packages/ beside this script (never the system's site-packages), which the
# runners put first on the path. With everything already there it does nothing, and needs neither
# apt-get update nor a network: a platform image prepared in advance (or rebuilt offline) takes the
# bundle unchanged. PROJECT is the exercise's project folder (see check-python.sh).
set -eu
here="$(cd "$(dirname "$0")" && pwd)"
list="$1"
project="${2:-}"
folder="$here/python-packages"
export DEBIAN_FRONTEND=noninteractive
updated=""

# apt-get's own errors say a mirror cannot be reached, not what the grader needed: when it fails (no
# network, as on an image built offline), say which packages, why, and how to provide them, then fail.
unavailable() {
    {
        echo "grader: setup could not install the Debian/Ubuntu packages the grader needs: $*"
        echo "grader: apt-get needs the network to fetch them (apt's own messages are above)."
        echo "grader: either run the setup where the network is reachable (Gradescope's setup.sh has it)," \
             "or use a base image that has them already, made once with the network:"
        echo "grader:     RUN apt-get update && apt-get install -y --no-install-recommends $*"
        echo "grader: with every package already installed, the setup needs no network at all."
    } >&2
    exit 1
}

apt_install() {
    echo "grader: installing $*"
    if [ -z "$updated" ]; then
        apt-get update -qq || unavailable "$@"
        updated=yes
    fi
    apt-get install -y -qq --no-install-recommends "$@" || unavailable "$@"
}

missing=""
for package in $(cat "$list"); do
    if ! dpkg-query -W -f='${Status}\n' "$package" 2>/dev/null | grep -q '^install ok installed$'; then
        missing="$missing $package"
    fi
done
if [ -n "$missing" ]; then
    # shellcheck disable=SC2086
    apt_install $missing
fi

# Asked only now: the Debian packages just installed may be recent enough. A Python older than the
# grader needs stops the setup here, with check-python.sh's reason.
# shellcheck disable=SC2086
wanted="$(sh "$here/check-python.sh" --missing $project)"
if [ -n "$wanted" ]; then
    if ! /usr/bin/python3 -m pip --version >/dev/null 2>&1; then
        apt_install python3-pip
    fi
    constraints="$(mktemp)"
    sh "$here/check-python.sh" --constraints >"$constraints"
    echo "grader: installing with pip into $folder:" $wanted
    # shellcheck disable=SC2086
    if ! /usr/bin/python3 -m pip install --quiet --disable-pip-version-check --no-cache-dir --no-warn-script-location \
            --upgrade --target "$folder" -c "$constraints" $wanted; then
        rm -f "$constraints"
        echo "grader: pip could not install$(printf ' %s' $wanted) into $folder: it needs the network" \
             "(Gradescope's setup.sh and a PrairieLearn image build have it), or put those versions in the" \
             "base image for /usr/bin/python3, made once with the network:" >&2
        echo "grader:     RUN /usr/bin/python3 -m pip install$(printf ' %s' $wanted)" >&2
        exit 1
    fi
    rm -f "$constraints"
fi

if [ -z "$missing" ] && [ -z "$wanted" ]; then
    echo "grader: every package the grader needs is installed"
fi
