"""The fields of a form whose body was cut off at the service's size cap: those that arrived whole.

A body over the cap is refused before the application reads it; its first bytes (never more than the
cap) are still enough to give a student back the code they typed when the rest was a file too large to
take. Only a field that ends before the cut is returned: the beginning of a field cut short must never
pass for the whole of it.
"""

from __future__ import annotations

from collections.abc import Collection
from urllib.parse import parse_qsl

from python_multipart.multipart import parse_options_header


def whole_fields(prefix: bytes, content_type: str, names: Collection[str]) -> dict[str, str]:
    """The text fields called one of `names` that lie whole in `prefix`, the first bytes of a form body
    (urlencoded or multipart) whose end was cut off. Files are left out, and so is any other body."""
    kind, options = parse_options_header(content_type)
    if kind == b"application/x-www-form-urlencoded":
        return _urlencoded(prefix, names)
    boundary = options.get(b"boundary")
    if kind == b"multipart/form-data" and boundary:
        return _multipart(prefix, boundary, names)
    return {}


def _urlencoded(prefix: bytes, names: Collection[str]) -> dict[str, str]:
    # A pair is whole when a '&' follows it: the last pair of a cut body may have lost its end.
    whole = prefix[:prefix.rfind(b"&")] if b"&" in prefix else b""
    pairs = parse_qsl(whole.decode("latin-1"), keep_blank_values=True, encoding="utf-8", errors="replace")
    return {name: value for name, value in pairs if name in names}


def _multipart(prefix: bytes, boundary: bytes, names: Collection[str]) -> dict[str, str]:
    # Every part is followed by a delimiter; the part after the last delimiter seen may have lost its end.
    pieces = (b"\r\n" + prefix).split(b"\r\n--" + boundary)
    found: dict[str, str] = {}
    for piece in pieces[1:-1]:
        if piece.startswith(b"--"):  # the closing delimiter: nothing comes after it
            break
        head, separator, content = piece.partition(b"\r\n\r\n")
        if not separator:
            continue
        name, is_file = _disposition(head)
        if name in names and not is_file:
            found[name] = content.decode("utf-8", errors="replace")
    return found


def _disposition(head: bytes) -> tuple[str, bool]:
    """(the field's name, whether it is a file) from a part's headers."""
    for line in head.split(b"\r\n"):
        header, _, value = line.partition(b":")
        if header.strip().lower() == b"content-disposition":
            _, options = parse_options_header(value.strip())
            return options.get(b"name", b"").decode("utf-8", errors="replace"), b"filename" in options
    return "", False
