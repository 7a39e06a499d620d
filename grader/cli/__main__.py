"""`python -m grader.cli`: the command line alone. `python -m grader`, what the console script runs (and the
platform bundles), also starts a grading's harness before it reads its command line."""

import sys

from grader.cli import main

sys.exit(main())
