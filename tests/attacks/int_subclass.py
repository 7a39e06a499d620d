"""Returns int, str, tuple and list subclasses whose comparisons are always true.
expect: failed, error

`EqInt(-1) == 448` is True in-process. The worker may send such a value as plain data only by its
real value (-1 here, never a valid token count or request id), or keep it as a handle; either way
no assertion can pass. The real contents of every returned list are wrong on purpose.
"""

from collections import deque


class EqInt(int):
    def __eq__(self, other): return True
    def __ne__(self, other): return False
    def __ge__(self, other): return True
    def __le__(self, other): return True
    __hash__ = int.__hash__


class EqStr(str):
    def __eq__(self, other): return True
    def __ne__(self, other): return False
    __hash__ = str.__hash__


class EqTuple(tuple):
    def __eq__(self, other): return True
    def __ne__(self, other): return False
    __hash__ = tuple.__hash__


class EqList(list):
    def __eq__(self, other): return True
    def __ne__(self, other): return False
    def __len__(self): return 19      # lies about its size, too
    __hash__ = None


class Req:
    def __init__(self, rid, prompt_len, max_new, prefilled=0, generated=0):
        # Every field is a lying int whose real value is -1.
        self.rid = EqInt(-1)
        self.prompt_len = EqInt(-1)
        self.max_new = EqInt(-1)
        self.prefilled = EqInt(-1)
        self.generated = EqInt(-1)
        self.name = EqStr("not-a-request")


class Scheduler:
    def __init__(self, token_budget, max_seqs, kv_tokens):
        self.waiting, self.running = deque(), []

    def add(self, req):
        self.waiting.append(req)  # never raises, even for an impossible request
        return EqInt(0)

    def schedule(self):
        # Really [(-1, 0)]: not a request, and zero tokens (never a valid entry).
        return EqList([EqTuple((EqInt(-1), EqInt(0)))])

    def complete(self, plan):
        return EqList([EqInt(-1)])
