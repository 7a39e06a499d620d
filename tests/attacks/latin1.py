"""Valid Python saved as Latin-1 with non-ASCII characters and no coding cookie (not UTF-8).
expect: rejected

Python reads source as UTF-8 unless a cookie says otherwise, so this fails to import; the grader
must say "not UTF-8" rather than show a decoding traceback.
"""

from collections import deque

GREETING = "Voilà, déjà fini: ½ · ¿qué? · Ærø · ß"  # é, à, ½ ... are single Latin-1 bytes


class Req:
    def __init__(self, rid, prompt_len, max_new, prefilled=0, generated=0):
        self.rid, self.prompt_len, self.max_new = rid, prompt_len, max_new
        self.prefilled, self.generated = prefilled, generated


class Scheduler:
    def __init__(self, token_budget, max_seqs, kv_tokens):
        self.waiting, self.running = deque(), []

    def add(self, req):
        self.waiting.append(req)

    def schedule(self):
        return []

    def complete(self, plan):
        return []
