#!/usr/bin/env bash
# The Docker Compose CLI plugin (`docker compose`), beside Debian 12's `docker-compose` 1.29, so that the
# course server's stack is brought up by both (tests/test_stack.py). Debian 12 does not package the
# plugin; Debian 13's `docker-compose` package is it (a Go binary needing only libc6 >= 2.34). Taken from
# Debian's archive and checked as apt would: the suite's InRelease against Debian's archive keyring, the
# package index against the release's SHA-256, the package against the index's.
set -euo pipefail
PLUGINS=/usr/local/lib/docker/cli-plugins
docker compose version >/dev/null 2>&1 && exit 0

mirror=http://deb.debian.org/debian
suite=trixie
index=main/binary-amd64/Packages.xz
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"

curl -fsSL --retry 3 -o InRelease "$mirror/dists/$suite/InRelease"
gpgv --quiet --keyring /usr/share/keyrings/debian-archive-keyring.gpg --output Release InRelease 2>/dev/null \
    || { echo "the $suite release is not signed by a key of debian-archive-keyring" >&2; exit 1; }
index_sha=$(awk -v want="$index" '/^SHA256:/ {on = 1; next} /^[^ ]/ {on = 0} on && $3 == want {print $1}' Release)
[ -n "$index_sha" ] || { echo "the $suite release names no $index" >&2; exit 1; }
curl -fsSL --retry 3 -o Packages.xz "$mirror/dists/$suite/$index"
echo "$index_sha  Packages.xz" | sha256sum --check --quiet

xz -dc Packages.xz | awk '/^Package: docker-compose$/ {on = 1} /^$/ {on = 0} on' > stanza
file=$(awk '/^Filename:/ {print $2}' stanza)
file_sha=$(awk '/^SHA256:/ {print $2}' stanza)
[ -n "$file" ] && [ -n "$file_sha" ] || { echo "no docker-compose in $suite's index" >&2; exit 1; }
curl -fsSL --retry 3 -o docker-compose.deb "$mirror/$file"
echo "$file_sha  docker-compose.deb" | sha256sum --check --quiet

dpkg-deb -x docker-compose.deb unpacked
install -D -m 0755 unpacked/usr/libexec/docker/cli-plugins/docker-compose "$PLUGINS/docker-compose"
docker compose version
