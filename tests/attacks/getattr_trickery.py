"""Objects whose attribute access loops forever, raises on everything or returns enormous strings.
expect: failed, timeout, crashed, error

The worker reads public attributes through getattr to snapshot them after every call, and may call
isinstance(), which falls back to `obj.__class__`. Req() picks a flavour by `rid % 4`:
  0: `prefilled` is a property that never returns;
  1: `__getattribute__` raises (not AttributeError) for every name, `__class__` and `__dict__` too;
  2: `__getattr__` hands out a 64 MB string for any missing name and `__dir__` lists 100,000 names;
  3: `__getattribute__` itself loops forever.
The Scheduler's `running` is a property that raises (mild on purpose: a Scheduler that blocked
every snapshot would hide the Req flavours). A snapshot must be bounded in time and size, and a
failure to read must not pass for a reading.
"""

from collections import deque

HUGE = "A" * (64 << 20)


class Req:
    def __new__(cls, rid, *args, **kwargs):
        flavour = [SlowProperty, RaiseEverything, HugeAttributes, LoopEverything][rid % 4]
        return object.__new__(flavour)

    def __init__(self, rid, prompt_len, max_new, prefilled=0, generated=0):
        object.__setattr__(self, "rid", rid)
        object.__setattr__(self, "prompt_len", prompt_len)
        object.__setattr__(self, "max_new", max_new)


class SlowProperty(Req):
    @property
    def prefilled(self):
        while True:
            pass

    generated = prefilled


class RaiseEverything(Req):
    def __getattribute__(self, name):
        raise RuntimeError(f"no attribute for you: {name}")


class HugeAttributes(Req):
    def __getattr__(self, name):
        return HUGE

    def __dir__(self):
        return [f"field_{i}" for i in range(100_000)]


class LoopEverything(Req):
    def __getattribute__(self, name):
        while True:
            pass


class Scheduler:
    def __init__(self, token_budget, max_seqs, kv_tokens):
        self.waiting = deque()

    @property
    def running(self):
        raise RuntimeError("running is not for reading")

    def add(self, req):
        self.waiting.append(req)  # never rejects an impossible request

    def schedule(self):
        return [(r, 0) for r in self.waiting] or [("not a request", 0)]  # n = 0 is never valid

    def complete(self, plan):
        return [-1]
