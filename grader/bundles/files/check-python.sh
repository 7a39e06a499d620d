#!/bin/sh
# The grader needs Python 3.11 or later as /usr/bin/python3 (the sandbox's workers see only /usr),
# and every module a grading imports. Run once where the platform builds its image, so that a base
# image that cannot grade fails there, loudly, and not on the first student's submission.
set -eu
here="$(cd "$(dirname "$0")" && pwd)"
if ! /usr/bin/python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
    echo "grader: /usr/bin/python3 is $(/usr/bin/python3 --version 2>&1); the grader needs 3.11 or later" \
         "(Debian bookworm, Ubuntu 24.04 or later)" >&2
    exit 1
fi
PYTHONPATH="$here" /usr/bin/python3 -c 'import grader.bundles.run, grader.cli, grader.exports, grader.sandbox.local, pytest, pytest_timeout'
command -v bwrap >/dev/null
echo "grader: ready ($(/usr/bin/python3 --version), $(bwrap --version))"
