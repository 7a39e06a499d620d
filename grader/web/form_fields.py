"""Each form field's limit, checked before any handler reads the form.

A route names its fields (`Field`): how long each may be, whether it must be there, whether it is a file.
Whatever route, a field sent twice is refused, and a field the route does not name is held to
DEFAULT_CHARS (a form another page adds keeps working, within a bound). A refusal is a 400 page that names
the field and its limit: nothing a form sends is cut short or taken as something else without a word.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from starlette.datastructures import FormData, UploadFile

from grader.web.base import Page

DEFAULT_CHARS = 2000  # a field no route names: a date, a choice, a short reason
TOKEN_CHARS = 200  # a CSRF token, a confirmation, an id
CODE_CHARS = 1 << 20  # a submission typed in, a roster pasted: the body's cap bounds them first


@dataclass(frozen=True)
class Field:
    name: str
    most_chars: int = TOKEN_CHARS
    required: bool = False
    file: bool = False  # a file input (its size is the body cap's); a text field otherwise
    label: str = ""  # what the page calls it, when not its name

    @property
    def called(self) -> str:
        return self.label or self.name


def checked_form(form: FormData, fields: Sequence[Field]) -> None:
    """Page(400) at the first field of `form` over its limit, sent twice, of the wrong kind or missing."""
    named = {field.name: field for field in fields}
    seen: set[str] = set()
    for name, value in form.multi_items():
        shown = name[:40]
        if name in seen:
            raise Page(400, "Form not understood", f"The field “{shown}” was sent twice: send the form from its page.")
        seen.add(name)
        field = named.get(name, Field(name, DEFAULT_CHARS))
        if isinstance(value, UploadFile):
            if not field.file:
                raise Page(400, "Form not understood", f"The field “{field.called}” is text, and a file was sent.")
            continue
        if field.file and value == "":
            continue  # a browser sends an empty file input as an empty text field
        if field.file:
            raise Page(400, "Form not understood", f"The field “{field.called}” takes a file, and text was sent.")
        if len(value) > field.most_chars:
            raise Page(400, "Too long", f"The {field.called} is {len(value):,} characters long: at most "
                                        f"{field.most_chars:,} are taken. Shorten it and send it again.")
    for field in fields:
        if field.required and field.name not in seen:
            raise Page(400, "Form not understood", f"The form did not carry its field “{field.called}”: send it "
                                                   "from its page.")
