"""How this suite's tests find `_cb_helpers`, the helper module beside them: pytest's own way.

pytest imports this file before any test module of the folder and, in its default import mode
(`prepend`), puts the folder of a conftest.py or a test module that is not in a package first on
`sys.path` as it imports it. So `from _cb_helpers import ...` works wherever the suite runs: in the
sandbox's harness (the suite under the job's `secret/suites/`), in-process
(`pytest -p grader.harness.inprocess ...`), and in the host's collection of the suite. No test file
edits `sys.path`; the suite's fixtures (`ns`, `reference`, `feedback`, `seed`) come from the
harness's plugin, not from here.
"""
