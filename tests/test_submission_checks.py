"""What a submission must be before any sandbox starts, refused with what to do instead."""

from __future__ import annotations

import json

import pytest

from grader.core.validate import Rejected, validate

NOTEBOOK = {"cells": [{"cell_type": "code", "source": ["class Scheduler:\n", "    pass\n"], "metadata": {},
                       "outputs": [], "execution_count": None}],
            "metadata": {"kernelspec": {"name": "python3"}}, "nbformat": 4, "nbformat_minor": 5}


@pytest.mark.unit
def test_a_notebook_is_refused_as_a_notebook_with_how_to_export_it():
    data = json.dumps(NOTEBOOK, indent=1).encode()
    compile(data, "x.py", "exec")  # it is valid Python (a dict display): only the check tells it apart
    with pytest.raises(Rejected, match=r"Jupyter notebook .*nbconvert --to script.* submit that as scheduler\.py"):
        validate(data, "scheduler.py", 100_000)


@pytest.mark.parametrize("source", ['{"cells": 1}\n', 'CONFIG = {"cells": [], "nbformat": 4}\n',
                                    '{"cells": [], "nbformat": 4}\nclass Scheduler: ...\n'])
def test_python_that_merely_looks_like_json_is_graded(source):
    assert validate(source.encode(), "scheduler.py", 100_000).source == source.encode()
