"""Returns a plan whose token counts are ints of 5,000 digits: legal Python, and wrong.
expect: failed

Python 3.11 refuses to turn an int of more than 4,300 digits into text, so a worker that sends one as
JSON fails while replying. The test must fail for what the code did ("schedule() returned an int with
5,000 digits"), not for a worker that seemed to end by itself or to break the protocol.
"""

from types import SimpleNamespace


class Req(SimpleNamespace):
    def __init__(self, rid, prompt_len, max_new):
        super().__init__(rid=rid, prompt_len=prompt_len, max_new=max_new, prefilled=0, generated=0)


class Scheduler(SimpleNamespace):
    def __init__(self, token_budget, max_seqs, kv_tokens):
        super().__init__(queue=[])

    def add(self, req):
        self.queue.append(req)

    def schedule(self):
        return [(req, 10 ** 4999) for req in self.queue]

    def complete(self, plan):
        return []
