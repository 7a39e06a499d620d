"""`python -m grader.cli`: what the `grader` console script runs (the platform bundles call it so)."""

import sys

from grader.cli import main

sys.exit(main())
