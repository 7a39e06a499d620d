"""Req keeps its state in __slots__, and prefilled and generated are properties over them."""


class Req:
    __slots__ = ("rid", "prompt_len", "max_new", "_prefilled", "_generated")

    def __init__(self, rid, prompt_len, max_new, prefilled=0, generated=0):
        self.rid, self.prompt_len, self.max_new = rid, prompt_len, max_new
        self._prefilled, self._generated = prefilled, generated

    @property
    def prefilled(self):
        return self._prefilled

    @prefilled.setter
    def prefilled(self, value):
        if not 0 <= value <= self.prompt_len:
            raise ValueError(f"prefilled {value} is outside 0..{self.prompt_len}")
        self._prefilled = value

    @property
    def generated(self):
        return self._generated

    @generated.setter
    def generated(self, value):
        self._generated = value

    @property
    def done(self):
        return self._generated >= self.max_new
