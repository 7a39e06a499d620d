"""The scheduler is also the map of its live requests by id: a dict subclass with the scheduler's methods
(tests call its methods, as on any object)."""

_Scheduler = Scheduler


class Scheduler(_Scheduler, dict):
    def __init__(self, token_budget, max_seqs, kv_tokens):
        dict.__init__(self)
        _Scheduler.__init__(self, token_budget, max_seqs, kv_tokens)

    def add(self, req):
        _Scheduler.add(self, req)
        self[req.rid] = req

    def complete(self, plan):
        finished = _Scheduler.complete(self, plan)
        for rid in finished:
            self.pop(rid, None)
        return finished

    def live(self):
        """The ids of the requests waiting or running."""
        return sorted(self)
