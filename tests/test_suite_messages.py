"""What the block manager suite says when a program and the reference part ways: sentences that read
right for every kind of value, "changed" only for what a call changed, OutOfBlocks known by its class,
and the submission's own type names (never the proxy's). The helpers' functions alone: no worker."""

from __future__ import annotations

from typing import Any

import pytest

from tests.helpers import PROJECT, load_module

pytestmark = pytest.mark.unit


@pytest.fixture(scope="module")
def kv() -> Any:
    return load_module(PROJECT / "hidden_tests" / "paged_kv_cache" / "_kv_helpers.py", "_kv_helpers_words")


def state(kv: Any, outcome: str = "ok", tokens: Any = None) -> Any:
    return kv.State(outcome=outcome, free=4, tables={}, refs=[0, 0, 0, 0],
                    tokens=tokens if tokens is not None else [[], [], [], []])


def test_a_reader_that_raises_is_said_to_raise_not_to_be(kv):
    problem = kv.first_difference(state(kv), state(kv, tokens=[[], [], [], "raises KeyError"]))
    assert problem.startswith("block_tokens(3) should be [], yours raises KeyError"), problem
    assert "yours is" not in problem and "holds []" in problem  # and what a block never used answers


def test_a_refused_call_is_said_to_change_the_state_only_when_it_did(kv):
    reader_bug = [[], [], [], "raises KeyError"]
    # The reader raised before the call too: the call changed nothing, and no sentence says it did.
    same = kv.first_difference(state(kv, "KeyError"), state(kv, "KeyError", reader_bug), state(kv, "ok", reader_bug))
    assert "changed" not in same and same.startswith("block_tokens(3) should be []"), same
    # Before the first call, nothing of the program was read: no sentence says it changed either.
    first = kv.first_difference(state(kv, "KeyError"), state(kv, "KeyError", reader_bug))
    assert "changed" not in first, first
    # A read that answered right before the refused call and wrong after it: the call changed it.
    changed = kv.first_difference(state(kv, "KeyError"), state(kv, "KeyError", [[], [], [], [7]]), state(kv))
    assert "yours changed block_tokens(3)" in changed and "before the call, yours returns []" in changed, changed


def test_out_of_blocks_is_known_by_its_class_not_by_being_a_runtime_error(kv):
    class OutOfBlocks(RuntimeError):
        pass

    class CacheFull(OutOfBlocks):
        pass

    assert kv._outcome(OutOfBlocks("full"), "OutOfBlocks") == "OutOfBlocks"
    assert kv._outcome(CacheFull("full"), "OutOfBlocks") == "OutOfBlocks"
    assert kv._outcome(RuntimeError("full"), "OutOfBlocks") == "RuntimeError"
    problem = kv.first_difference(state(kv, "OutOfBlocks"), state(kv, "RuntimeError"))
    assert "yours raises a RuntimeError that is not an OutOfBlocks" in problem, problem


def test_a_value_of_the_submission_is_named_by_its_own_type(kv):
    class RemoteObject:  # the proxy a test holds: its repr names the submission's object
        def __repr__(self) -> str:
            return "list_iterator()"

    assert kv.kind_of(RemoteObject()) == "list_iterator"
    assert kv._plain(RemoteObject(), "list") == ("a list_iterator (an iterator, which can be read only once: "
                                                  "return a list, list(...)), not a list of ints")
    assert kv._plain((1, 2), "list") == [1, 2] and kv._plain("x", "int") == "a str, not an int"
