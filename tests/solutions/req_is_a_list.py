"""A request is a list (of the token ids it will emit, say) with its counts as attributes: the tests
construct it, read its attributes and hand it back, as with any other class."""


class Req(list):
    def __init__(self, rid, prompt_len, max_new, prefilled=0, generated=0):
        super().__init__()
        self.rid, self.prompt_len, self.max_new = rid, prompt_len, max_new
        self.prefilled, self.generated = prefilled, generated

    __hash__ = object.__hash__  # one request is one request, whatever tokens it holds
