#!/usr/bin/env bash
# Gradescope runs this once, as root, while it builds the autograder's image (the bundle is unpacked
# in /autograder/source). It installs the Debian/Ubuntu packages the grader needs, those missing only,
# and checks that the image can grade.
set -euo pipefail
cd "$(dirname "$0")"
sh ./install-packages.sh packages.txt
sh ./check-python.sh
