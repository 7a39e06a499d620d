"""The suites' bytecode made on the host: a harness that runs the host's Python finds each module of its
suites compiled where pytest and Python look first, and the grading is the one it would have been had
it compiled them itself: the same records, tracebacks that name the real files, asserts explained."""

from __future__ import annotations

import marshal
import os
from pathlib import Path

import pytest

from grader.core.exercise import load_exercise
from grader.core.grading import grade_bytes
from grader.harness.bytecode import install_bytecode, named
from grader.harness.contract import BYTECODE_FILE
from grader.sandbox import bytecode, layout
from grader.sandbox.bytecode import PLACEHOLDER, compiled, made, pycache_file, pycache_path, suites_bytecode
from grader.sandbox.local import LocalBackend
from tests.helpers import EXERCISE, REFERENCE, exercise_copy, mutant_file

MUTANT = mutant_file("03_skip_blocked_head")

# A conftest.py, which pytest imports before the test files beside it: whether the test file below was
# compiled before pytest met it (by the host), or is still to be compiled (by pytest, as it imports it).
SEES_THE_BYTECODE = '''
import os

import pytest
from _pytest.assertion.rewrite import PYC_TAIL

AHEAD = os.path.exists(os.path.join(os.path.dirname(__file__), "__pycache__", "test_zz_itself" + PYC_TAIL))


@pytest.fixture
def compiled_ahead():
    return AHEAD
'''

# A test file that looks at itself from inside the grading: its code names the file where it is, and it
# was compiled by the host.
LOOKS_AT_ITSELF = '''
def test_its_code_names_its_own_file_and_came_compiled(compiled_ahead):
    assert test_its_code_names_its_own_file_and_came_compiled.__code__.co_filename == __file__
    assert compiled_ahead


def test_an_assert_is_explained():
    numbers = [1, 2]
    assert len(numbers) == 3
'''


def view(card):
    """The card, but for the test that looks at its own bytecode (there only with the host's)."""
    return (card.status, card.reason, [(t.id, t.status, t.message, t.traceback) for t in card.tests
                                       if "came_compiled" not in t.name])


@pytest.mark.skipif(os.geteuid() != 0, reason="the local sandbox's namespaces as root")
@pytest.mark.parametrize("submission", [REFERENCE, MUTANT], ids=lambda p: p.stem)
def test_a_grading_with_the_hosts_bytecode_is_the_grading_without_it(submission, tmp_path, monkeypatch):
    folder = exercise_copy(tmp_path)
    (tmp_path / "exercises" / EXERCISE / "tests" / "test_zz_itself.py").write_text(LOOKS_AT_ITSELF)
    (tmp_path / "exercises" / EXERCISE / "tests" / "conftest.py").write_text(SEES_THE_BYTECODE)
    exercise = load_exercise(folder)
    # One lane: a second lane's collection would find the file pytest compiled and wrote in the first.
    with_bytecode = grade_bytes(submission.read_bytes(), exercise, "premium", LocalBackend(lanes=1), "local")
    monkeypatch.setattr(layout, "suites_bytecode", lambda modules: None)
    without = grade_bytes(submission.read_bytes(), exercise, "premium", LocalBackend(lanes=1), "local")
    assert with_bytecode.status == "graded", with_bytecode.reason
    assert view(with_bytecode) == view(without)
    looked = [(t.status, u.status) for t, u in zip(with_bytecode.tests, without.tests) if "came_compiled" in t.name]
    assert looked == [("passed", "failed")]  # without the host's bytecode, pytest compiled it as it met it
    explained = next(t for t in with_bytecode.tests if t.name == "test_an_assert_is_explained")
    assert explained.status == "failed" and "assert 2 == 3" in explained.message, explained.message


@pytest.mark.unit
def test_the_code_is_compiled_as_the_harness_would_and_named_where_it_lands(tmp_path):
    test_file = b"def test_x():\n    x = 1\n    assert x == 2\n"
    helper = b"def helper():\n    assert False, 'kept'\n"
    found = compiled([("secret/suites/hidden/test_x.py", test_file), ("secret/suites/hidden/_help.py", helper),
                      ("secret/suites/hidden/broken.py", b"def (:\n")])
    assert set(found) == {"secret/suites/hidden/test_x.py", "secret/suites/hidden/_help.py"}  # left to the harness
    rewritten, plain = found["secret/suites/hidden/test_x.py"], found["secret/suites/hidden/_help.py"]
    assert "@pytest_ar" in rewritten.co_names  # pytest's assert rewriting
    assert "@pytest_ar" not in plain.co_names  # a helper, which pytest does not rewrite
    assert plain.co_filename == f"{PLACEHOLDER}/secret/suites/hidden/_help.py"
    # Asserts are kept whatever the host's own optimisation: the helper's raises.
    namespace: dict = {}
    exec(plain, namespace)
    with pytest.raises(AssertionError, match="kept"):
        namespace["helper"]()
    moved = named(rewritten, "/somewhere/test_x.py")
    assert moved.co_filename == "/somewhere/test_x.py"
    assert all(c.co_filename == "/somewhere/test_x.py" for c in moved.co_consts if hasattr(c, "co_filename"))


@pytest.mark.unit
def test_python_imports_a_helper_from_the_hosts_file_while_its_source_is_the_one_compiled(tmp_path, monkeypatch):
    import importlib
    import sys

    source = b"VALUE = 'from the source'\n"
    files, _ = made([("suite/_help.py", source)])
    assert [path for path, _ in files] == [pycache_path("suite/_help.py")]
    # The file's code is told apart from the source's: the header names this source, the code says "host".
    file = pycache_file(source, compile(b"VALUE = 'from the host'\n", "x", "exec"))
    (tmp_path / "suite" / "__pycache__").mkdir(parents=True)
    (tmp_path / "suite" / "_help.py").write_bytes(source)
    (tmp_path / files[0][0]).write_bytes(file)
    monkeypatch.syspath_prepend(str(tmp_path / "suite"))
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    assert importlib.import_module("_help").VALUE == "from the host"
    # A source other than the one compiled: Python compiles the source (the file checks its hash).
    (tmp_path / "suite" / "_help.py").write_bytes(b"VALUE = 'changed'\n")
    monkeypatch.delitem(sys.modules, "_help")
    assert importlib.import_module("_help").VALUE == "changed"
    monkeypatch.delitem(sys.modules, "_help")


@pytest.mark.unit
def test_the_harness_writes_each_test_files_code_where_pytest_looks(tmp_path):
    from _pytest.assertion.rewrite import PYC_TAIL

    suite = tmp_path / "secret" / "suites" / "hidden"
    suite.mkdir(parents=True)
    sources = {"secret/suites/hidden/test_x.py": b"def test_x():\n    assert 1\n",
               "secret/suites/hidden/conftest.py": b"X = 1\n"}
    for path, source in sources.items():
        (tmp_path / path).write_bytes(source)
    (tmp_path / BYTECODE_FILE).write_bytes(made(sources.items())[1])
    install_bytecode(str(tmp_path))
    cache = suite / "__pycache__"
    assert sorted(p.name for p in cache.iterdir()) == sorted(["conftest" + PYC_TAIL, "test_x" + PYC_TAIL])
    data = (cache / ("test_x" + PYC_TAIL)).read_bytes()
    stat = (suite / "test_x.py").stat()
    assert int.from_bytes(data[8:12], "little") == int(stat.st_mtime) & 0xFFFFFFFF
    assert int.from_bytes(data[12:16], "little") == stat.st_size
    assert marshal.loads(data[16:]).co_filename == str(suite / "test_x.py")
    assert oct(cache.stat().st_mode & 0o777) == "0o700"
    install_bytecode(str(tmp_path / "elsewhere"))  # a job without bytecode: nothing to do


@pytest.mark.unit
def test_the_bytecode_is_made_once_and_kept_by_its_sources_and_pytest(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    calls: list[int] = []
    real = bytecode.made
    monkeypatch.setattr(bytecode, "made", lambda sources: calls.append(1) or real(sources))
    first = suites_bytecode([("secret/suites/a/test_a.py", b"def test_a():\n    assert 1\n")])
    assert first is not None and calls == [1]
    bytecode._kept_or_made.cache_clear()
    assert suites_bytecode([("secret/suites/a/test_a.py", b"def test_a():\n    assert 1\n")]) == first
    assert calls == [1]  # read from the disk this time
    assert suites_bytecode([("secret/suites/a/test_a.py", b"def test_a():\n    assert 2\n")]) != first
    assert calls == [1, 1]
    assert len(list(Path(tmp_path, "grader").glob("suites-*.marshal"))) == 2
