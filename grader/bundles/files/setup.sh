#!/usr/bin/env bash
# Gradescope runs this once, as root, while it builds the autograder's image (the bundle is unpacked
# in /autograder/source). It installs what the grader needs and the image lacks: the Debian/Ubuntu
# packages missing, and, where /usr/bin/python3's are too old (Ubuntu 22.04's pytest), the pinned
# versions with pip into /autograder/source/python-packages (run_autograder puts it on the path). Then
# it checks that the image can grade.
set -euo pipefail
cd "$(dirname "$0")"
sh ./install-packages.sh packages.txt project
sh ./check-python.sh project
