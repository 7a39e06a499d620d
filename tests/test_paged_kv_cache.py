"""The second exercise, a paged KV-cache block manager, graded and audited like the first."""

from __future__ import annotations

from typing import Any

import pytest

from grader.audit.match import diagnose_graded
from grader.cli import main
from grader.confined import protocol
from grader.confined.limits import Limits
from grader.core.exercise import load_exercise
from grader.core.grading import grade_bytes
from grader.harness.client import Scenario
from grader.sandbox.local import run_local
from tests.helpers import PROJECT, load_module, mutant_file, worker_for

SLUG = "paged_kv_cache"
REFERENCE = PROJECT / "solutions" / SLUG / "block_manager.py"
STUB = PROJECT / "exercises" / SLUG / "block_manager.py"


@pytest.fixture(scope="module")
def exercise():
    return load_exercise(SLUG)


def test_the_reference_gets_full_marks_on_every_tier(exercise):
    for tier in exercise.tiers:
        card = grade_bytes(REFERENCE.read_bytes(), exercise, tier, run_local, "local")
        assert card.status == "graded", card.reason
        assert card.score == card.max_score > 0, [t.message for t in card.tests if t.status != "passed"]
        assert {t.suite for t in card.tests} == set(exercise.tiers[tier])


@pytest.mark.parametrize("name", ["manager_is_a_dict", "manager_is_a_list", "manager_is_a_set"])
def test_a_manager_that_is_also_a_builtin_container_gets_full_marks(exercise, name):
    # The object a test constructs is the object it calls: a subclass of dict, list or set with methods
    # of its own must not cross as the container's items (which have no `allocate`).
    source = REFERENCE.read_bytes() + b"\n\n" + (PROJECT / "tests" / "solutions" / SLUG / f"{name}.py").read_bytes()
    card = grade_bytes(source, exercise, exercise.top_tier, run_local, "local", diagnose=diagnose_graded)
    assert card.status == "graded" and card.score == card.max_score > 0, \
        [(t.name, t.message[:200]) for t in card.tests if t.status != "passed"]
    assert card.diagnosis == []


def test_the_stub_fails_every_test_as_not_implemented(exercise):
    card = grade_bytes(STUB.read_bytes(), exercise, "free", run_local, "local")
    assert card.status == "graded" and card.score == 0 and card.tests
    assert all(t.status == "failed" and "not implemented" in t.message for t in card.tests)


def test_exceptions_of_several_kinds_are_each_of_them(exercise):
    """A correct solution whose exceptions are of several kinds at once (a full cache that is an
    OutOfBlocks and a MemoryError; a mistaken sequence id that is a KeyError and a ValueError, raised
    where either is asked for) gets full marks, as it would in-process."""
    source = REFERENCE.read_text()
    source = source.replace("class BlockManager:", (
        "class CacheFull(MemoryError, OutOfBlocks):\n    pass\n\n\n"
        "class SequenceError(KeyError, ValueError):\n    pass\n\n\nclass BlockManager:"), 1)
    for old, new in (("raise OutOfBlocks(", "raise CacheFull("),
                     ("raise ValueError(f\"sequence", "raise SequenceError(f\"sequence"),
                     ("raise KeyError(", "raise SequenceError(")):
        assert old in source
        source = source.replace(old, new)
    card = grade_bytes(source.encode(), exercise, "premium", run_local, "local")
    assert card.status == "graded", card.reason
    assert card.score == card.max_score, [(t.name, t.message) for t in card.tests if t.status != "passed"]


def test_a_wrong_copy_on_write_shows_the_block_tables_step_by_step(exercise):
    mutant = mutant_file("07_no_copy_on_write", SLUG)
    card = grade_bytes(mutant.read_bytes(), exercise, "premium", run_local, "local")
    test = next(t for t in card.tests if t.name == "test_copy_on_write_leaves_the_parent_untouched")
    assert test.status == "failed"
    assert test.message.startswith("at step 3, append_token(2, 7): block_table(2) should be [0, 2], yours returns "
                                   "[0, 1]."), test.message
    table = next(a for a in test.artifacts if a["kind"] == "table")
    assert table["title"].startswith("step 3, append_token(2, 7)") and table["columns"] == ["read", "reference", "your code"]
    # The reads that agree are left out: block 1 is still shared on your side, and block 2 holds nothing.
    assert table["rows"][0] == ["block_table(2)", "[0, 2]", "[0, 1]"]
    assert all(reference != yours for _, reference, yours in table["rows"]), table["rows"]
    assert not [a for a in test.artifacts if a["kind"] == "trace"]  # both hold as many blocks: no trace


@pytest.mark.slow
def test_the_exercise_passes_its_audit(capsys):
    assert main(["audit", SLUG, "--sandbox", "local"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "the suite is strong" in out
    caught, total = out.split(" mutants caught")[0].rsplit(" ", 1)[1].split("/")
    assert caught == total and int(total) >= 15


def test_an_exception_of_another_kind_is_named_once(exercise):
    mutant = mutant_file("17_append_out_of_blocks_is_index_error", SLUG)
    card = grade_bytes(mutant.read_bytes(), exercise, exercise.top_tier, run_local, "local")
    messages = [t.message for t in card.tests if "IndexError" in t.message]
    assert messages and all("yours raises IndexError: index out of range" in m for m in messages), messages


# -- the premium suite's driver, on a worker of the tests' own ---------------------------------------

@pytest.fixture(scope="module")
def helpers() -> Any:
    return load_module(PROJECT / "hidden_tests" / SLUG / "_kv_helpers.py", "_kv_helpers_under_test")


@pytest.fixture(scope="module")
def reference() -> dict[str, Any]:
    return vars(load_module(REFERENCE, "kv_reference_for_the_driver"))


class Names:
    """The `ns` fixture over a worker of the tests' own: its names as proxies, and scenarios."""

    def __init__(self, client: Any) -> None:
        self.client = client

    def __getitem__(self, name: str) -> Any:
        return self.client.lookup(name)

    def scenario(self) -> Scenario:
        return Scenario(self.client, ["BlockManager"])


class NoFeedback:
    def text(self, *args: Any) -> None:
        pass

    def table(self, *args: Any, **kwargs: Any) -> None:
        pass

    def trace(self, *args: Any, **kwargs: Any) -> None:
        pass


@pytest.fixture
def counted(helpers, monkeypatch) -> tuple[list[Any], list[Any]]:
    """(every message the harness sends to a worker, every replay the driver makes), as they happen."""
    sent: list[Any] = []
    replays: list[Any] = []
    send, start = protocol.send, helpers.Replay.__init__
    monkeypatch.setattr(protocol, "send",
                        lambda fd, message, *rest: (sent.append(message), send(fd, message, *rest))[1])
    monkeypatch.setattr(helpers.Replay, "__init__", lambda self, *args: (replays.append(self), start(self, *args))[1])
    return sent, replays


@pytest.mark.parametrize("source", [REFERENCE, mutant_file("17_append_out_of_blocks_is_index_error", SLUG),
                                    mutant_file("16_shared_blocks_counted_as_needed", SLUG)], ids=lambda p: p.stem)
def test_a_sequence_of_calls_is_replayed_in_one_message_and_one_more_per_exception(helpers, reference, counted, source):
    """The random tests made each call, and each of the up to 55 reads of the state after it, as a
    proxy round trip of its own (3 sequences of 70 calls: about 10,000 messages a test, 10-52 s under
    load, past the test's limit). A replay is one scenario, and one more after each call the reference
    raised at and each probe that a sequence is gone (a scenario stops at an exception), however many
    reads; shrinking replays the same way."""
    sent, replays = counted
    with worker_for(source.read_text(), Limits(call_timeout_s=10, import_timeout_s=5)) as client:
        ns = Names(client)
        for profile in sorted(helpers.PROFILES):
            for i in (1, 2, 3):
                sc = helpers.random_scenario(reference, f"messages/{i}", profile)
                sent.clear()
                replays.clear()
                try:
                    helpers.check(ns, reference, NoFeedback(), sc, shrink=True)
                except pytest.fail.Exception:
                    assert source != REFERENCE  # and the replays below include the shrinking's
                assert len(sent) == sum(replay.scenarios for replay in replays)  # nothing but scenarios
                for replay in replays:
                    # At most one more for each read of the first step that differs, where the
                    # submission's reads may raise too: the report shows all of that step's state.
                    reads = max(b - a for a, b in zip(replay.calls, replay.calls[1:] + [len(replay.ops)]))
                    full = any(method == "ref_count" for method, _ in replay.ops)
                    assert 1 <= replay.scenarios <= 1 + len(replay.ends) + (reads if full else 0), (profile, i)
                if source == REFERENCE:
                    # Each call the reference raised at ends a scenario, and so does each probe of a
                    # sequence a refused call named that does not exist after it (fork(seq, seq): a KeyError).
                    # (A probe that is the replay's last operation has nothing after it to send.)
                    raised = sum((state.outcome != "ok") + len(state.gone)
                                 for state in helpers.run_reference(reference, sc))
                    (replay,) = replays
                    assert len(replay.ends) == raised, (profile, i)
                    assert len(sent) == 1 + sum(end < len(replay.ops) - 1 for end in replay.ends), (profile, i)


def test_a_read_of_a_method_the_manager_lacks_is_named_as_when_a_test_reads_it(helpers, reference):
    """A scenario runs the reads in the worker; a method the manager does not have is still reported by
    the harness, as the proxy read named it, not compared as what the read raised."""
    source = REFERENCE.read_text().replace("def block_tokens(", "def _block_tokens(")
    with worker_for(source, Limits(call_timeout_s=10, import_timeout_s=5)) as client:
        with pytest.raises(AttributeError, match="block_tokens"):
            helpers.check(Names(client), reference, NoFeedback(), helpers.Scenario(4, 2, (("allocate", 1, [1, 2, 3]),)))


def test_a_replay_in_a_message_builds_the_managers_it_needs_and_reproduces_alone(exercise):
    """A program whose managers share state (a class attribute) fails only with a manager made before:
    the message's replay makes that one first, so pasted alone into a fresh program it shows the fault,
    where the failing manager's own calls alone would not."""
    wrong = PROJECT / "tests" / "wrong_programs" / SLUG / "prefixes_shared_by_every_manager.py"
    card = grade_bytes(wrong.read_bytes(), exercise, "premium", run_local, "local")
    test = next(t for t in card.tests if t.name == "test_two_managers_share_no_block_and_no_prompt")
    assert test.status == "failed" and "replay them first:" in test.message, test.message
    replay = test.message.split("replay them first:\n", 1)[1].strip().splitlines()
    assert replay[0].startswith("m1 = BlockManager(") and any(line.startswith("m = BlockManager(") for line in replay)
    alone = replay[next(i for i, line in enumerate(replay) if line.startswith("m = "))]

    def run(lines: list[str]) -> list[int]:
        module = load_module(wrong, "shared_prefixes_program")  # a fresh import: the shared table starts empty
        space = {"BlockManager": module.BlockManager}
        exec("\n".join(lines), space)
        return space["m"].block_table(1)

    want = load_module(REFERENCE, "kv_reference").BlockManager(4, 2)
    want.allocate(1, [1, 2, 3])
    assert run(replay) != want.block_table(1)  # the whole replay shows the fault
    assert run(replay[replay.index(alone):]) == want.block_table(1)  # the failing manager's calls alone do not
