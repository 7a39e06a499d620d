"""Puts HTML, Jinja, Markdown, ANSI, CSV-formula, XML-breaking and invalid Unicode text everywhere.
expect: failed

The text goes into exception messages, an exception type name, printed output, Req attributes and
the values the tests interpolate into their assertion messages (plan entries, emitted ids). Every
report (HTML, Markdown, terminal, JUnit XML, CSV, JSON) must escape it, and a lone surrogate or a
NUL must not crash the writer of the scorecard. The scheduler is wrong.
"""

import sys
from collections import deque

NASTY = "\n".join([
    "<script>alert('xss')</script><img src=x onerror=alert(1)><iframe src=javascript:alert(2)>",
    "{{ 7*7 }} {{ config }} {{ ''.__class__.__mro__[1].__subclasses__() }} {% raw %}{% endraw %}",
    "{% for x in range(10**9) %}{{ x }}{% endfor %} ${7*7} #{7*7} <%= 7*7 %>",
    "[click me](javascript:alert(3)) ![x](http://evil.example/track.png) <!-- </details> -->",
    "```\n</pre></code></td></tr></table></body> | a | b |\n|---|---|",
    "]]><![CDATA[ &amp; &#0; &xxe; <?xml version='1.0'?><!DOCTYPE x [<!ENTITY e 'e'>]>",
    '=HYPERLINK("http://evil.example","x") +cmd|\' /C calc\'!A0 @SUM(1+1) -2+3',
    "\x1b[2J\x1b[31mred\x1b[0m \x1b]8;;http://evil.example\x1b\\link\x1b]8;;\x1b\\ \x1b]0;title\x07",
    "NUL:\x00 BEL:\x07 FF:\x0c CR:\r LS:\u2028 PS:\u2029 RLO:\u202egnp.exe BOM:\ufeff",
    "lone surrogate: \ud800 \udfff",
])

# A class named with markup and a lone surrogate: type() accepts any string as a name.
Nasty = type("Err<b>{{7*7}}</b>\ud800", (RuntimeError,), {})


class Req:
    def __init__(self, rid, prompt_len, max_new, prefilled=0, generated=0):
        self.rid, self.prompt_len, self.max_new = rid, prompt_len, max_new
        self.prefilled, self.generated = prefilled, generated
        self.note = NASTY  # an extra public attribute, in case snapshots are rendered


class Scheduler:
    def __init__(self, token_budget, max_seqs, kv_tokens):
        self.kv_tokens = kv_tokens
        self.waiting, self.running = deque(), []

    def add(self, req):
        if req.prompt_len + req.max_new > self.kv_tokens:
            raise Nasty(NASTY)  # where a ValueError belongs
        self.waiting.append(req)

    def schedule(self):
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.write(NASTY + "\n")
            except UnicodeEncodeError:  # the surrogate: write it as raw bytes instead
                try:
                    stream.buffer.write(NASTY.encode("utf-8", "surrogatepass") + b"\n")
                except Exception:
                    stream.write(NASTY.encode("utf-8", "surrogatepass").decode("latin-1") + "\n")
            stream.flush()
        # The visible tests format plan[-1][1] and the chunks into their messages.
        return [(NASTY, NASTY)] * 3

    def complete(self, plan):
        raise Nasty(NASTY)
