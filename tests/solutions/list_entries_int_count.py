"""Plan entries are two-element lists, and token counts an int subclass with its own repr."""


class Tokens(int):
    def __repr__(self):
        return f"Tokens({int(self)})"


_schedule, _complete = Scheduler.schedule, Scheduler.complete


def _lists(self):
    return [[req, Tokens(n)] for req, n in _schedule(self)]


def _complete_lists(self, plan):
    return _complete(self, [(req, int(n)) for req, n in plan])


Scheduler.schedule, Scheduler.complete = _lists, _complete_lists
