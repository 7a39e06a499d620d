"""Returns objects that claim to equal anything (the classic always-equal hack) instead of plans.
expect: failed, error

`Anything() == x` is True for every x, `!=` is False, it hashes like 1, has a length, iterates,
converts to 1 through `__int__`/`__index__`/`__float__`, and every attribute is another Anything.
In-process, `assert plan == expected` would pass. Across the worker boundary such an object is
not plain data: it must stay a handle that never compares equal to an int, a list or a tuple.
"""

from collections import deque


class Anything:
    def __eq__(self, other): return True
    def __ne__(self, other): return False
    def __lt__(self, other): return False
    def __le__(self, other): return True
    def __gt__(self, other): return False
    def __ge__(self, other): return True
    def __hash__(self): return 1
    def __bool__(self): return True
    def __len__(self): return 19           # "19 chunks"
    def __int__(self): return 1            # "one token each"
    def __index__(self): return 1
    def __float__(self): return 1.0
    def __iter__(self): return iter([Anything(), Anything()])
    def __getitem__(self, key): return Anything()
    def __contains__(self, item): return True
    def __getattr__(self, name): return Anything()   # .rid, .prefilled, ... all "equal"
    def __call__(self, *a, **k): return Anything()
    def __repr__(self): return "1"
    __str__ = __repr__
    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = lambda self, other: Anything()


class AnythingList(list):
    """A real list whose comparisons are also rigged."""
    def __eq__(self, other): return True
    def __ne__(self, other): return False
    __hash__ = Anything.__hash__


class Req:
    def __init__(self, rid, prompt_len, max_new, prefilled=0, generated=0):
        self.rid, self.prompt_len, self.max_new = rid, prompt_len, max_new
        self._prefilled = prefilled

    # The tests read these through snapshots: they are not plain data, so they must stay handles.
    prefilled = property(lambda self: Anything())
    generated = property(lambda self: Anything())


class Scheduler:
    def __init__(self, token_budget, max_seqs, kv_tokens):
        self.waiting, self.running = deque(), []

    def add(self, req):
        self.waiting.append(req)
        return Anything()  # never raises, even for an impossible request

    def schedule(self):
        # A list of (Anything, Anything) pairs: iterates like a plan, but no number is real.
        return AnythingList((Anything(), Anything()) for _ in range(65))

    def complete(self, plan):
        return AnythingList([Anything(), Anything()])
