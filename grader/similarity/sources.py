"""Where the documents of a similarity report come from: the store (the submission of each student a
policy picks, with its scorecard), a class folder as `grader batch` reads it, the reference solution,
and earlier terms (another store, or a folder), compared with this class only."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from grader.core.exercise import Exercise
from grader.course.batch import discover
from grader.errors import StoreError
from grader.similarity.compare import Document

if TYPE_CHECKING:
    from grader.course.store import Store

Labeller = Callable[[str], str]


def _text(data: bytes) -> str:
    # A file that is not UTF-8 is still compared: its undecodable bytes stand for themselves.
    return data.decode("utf-8", errors="replace")


def from_store(store: Store, exercise: str, policy: str = "latest", kind: str = "student",
               label: Labeller = str) -> list[Document]:
    """The submission of each student that counts under `policy`, as the gradebook counts it."""
    from grader.course.gradebook import pick  # with the store: the service extra

    chosen = pick(store.submissions(exercise), policy)
    documents = []
    for (student, _), sub in sorted(chosen.items()):
        content = store.content(sub.id)
        if content is not None:
            documents.append(Document(label(student), kind, _text(content), sub.id, sub.card, sub.sha256))
    return documents


def from_folder(folder: Path, exercise: Exercise, kind: str = "student", label: Labeller = str) -> list[Document]:
    """Each student's file of a class folder (a file per student, or a folder per student). Files
    `grader batch` would refuse (a link out of the folder, two files for one student) are left out."""
    documents = []
    for candidate in discover(folder, exercise):
        if not candidate.ignored and not candidate.problem:
            data = candidate.path.read_bytes()
            documents.append(Document(label(candidate.student), kind, _text(data),
                                      sha256=hashlib.sha256(data).hexdigest()))
    return documents


def earlier(source: str, exercise: Exercise, policy: str) -> list[Document]:
    """An earlier term: a folder of files, or a store (an SQLite file or a database URL). Its documents
    are named after the source, so that `alice` of last year is never taken for this year's."""
    path = Path(source)
    name = path.stem if "://" not in source else source.rsplit("/", 1)[-1]

    def label(student: str) -> str:
        return f"{name}/{student}"

    if "://" not in source and path.is_dir():
        found = from_folder(path, exercise, "earlier", label)
    elif "://" in source or path.is_file():
        from grader.course.store import Store  # the service extra: only an earlier term's store needs it

        with Store(source) as store:
            found = from_store(store, exercise.slug, policy, "earlier", label)
    else:
        raise StoreError(f"--against {source}: neither a folder of submissions nor a store")
    for document in found:
        document.card = None  # another term's results are of other suites: only the text is compared
    return found


def reference(exercise: Exercise) -> list[Document]:
    return [Document("reference", "reference", _text(exercise.reference.read_bytes()))] \
        if exercise.reference.is_file() else []


def given_code(exercise: Exercise) -> list[str]:
    """The code every student was given: the stub, and the files exercise.toml lists under
    [similarity] given."""
    paths = [exercise.stub, *exercise.given_code]
    return [_text(p.read_bytes()) for p in paths if p.is_file()]


def attach_scorecards(documents: list[Document], store: Store, exercise: str) -> None:
    """For a class folder: each file's scorecard, where the store holds a grading of that very file
    (the same student, the same bytes), so that the report can compare results too."""
    graded = {(s.student, s.sha256): s for s in store.submissions(exercise) if s.card is not None}
    for document in documents:
        found = graded.get((document.label, document.sha256))
        if found is not None:
            document.submission_id, document.card = found.id, found.card
