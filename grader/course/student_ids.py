"""What a student id may be, the same for the store, a class folder and every page.

Apart from the store (grader/course/store.py), so that reading a class folder (`grader similarity`,
`grader batch`'s discovery) needs no database library.
"""

from __future__ import annotations

import re
import unicodedata

from grader.errors import StoreError

# Letters and digits of any script (`zoë`, `李雷`), '.', '_', '@' and '-', starting with a letter or digit:
# a file name and a page name on every system, with no control character, space or path separator.
STUDENT_ID = re.compile(r"[^\W_][\w.@-]{0,63}")

def validate_student_id(student: str) -> str:
    """`student` as the store keeps it (NFC: `zoë` typed on one system and listed by another's file
    system are one id), or StoreError saying what a student id may hold."""
    normal = unicodedata.normalize("NFC", student)
    if not STUDENT_ID.fullmatch(normal) or ".." in normal:
        raise StoreError(f"invalid student id {student!r}: use 1-64 letters (of any alphabet), digits, '.', '_', "
                         "'@' or '-', starting with a letter or digit")
    return normal
