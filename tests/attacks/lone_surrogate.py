"""Raises and prints text holding lone surrogates, which no UTF-8 file, database or terminal accepts.
expect: failed

Python strings may hold lone surrogates and JSON can carry them as escapes, but writing one as UTF-8
fails. The message and output of every test hold some: the scorecard, the reports, the store and the
terminal must still be written, with the surrogates replaced.
"""

import sys


class Req:
    def __init__(self, rid, prompt_len, max_new):
        self.rid, self.prompt_len, self.max_new, self.prefilled, self.generated = rid, prompt_len, max_new, 0, 0


class Scheduler:
    def __init__(self, *limits):
        self.requests = []

    def add(self, req):
        self.requests.append(req)

    def schedule(self):
        sys.stdout.reconfigure(errors="surrogatepass")  # prints the surrogate's bytes, not valid UTF-8
        print("schedule \ud800 called", flush=True)
        raise ValueError("no plan for \udcff\ud83d you")

    def complete(self, plan):
        raise ValueError("\udfff")
