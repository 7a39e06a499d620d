"""A syntax error on line 3, just after this docstring closes.
expect: rejected
""" class Scheduler(:
    def schedule(self):
        return []
