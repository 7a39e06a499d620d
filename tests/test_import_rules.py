"""The trust boundary in the tree: what each side of the sandbox may import.

- `grader.confined` (the code that runs beside the submission) imports only the standard library and
  itself: it is what ships into the confinement, whole, and nothing else is on a worker's path.
- `grader.harness` (the trusted in-sandbox side) imports the standard library, pytest, itself and the
  confined package: the sandbox holds nothing else of the grader.
- The host (every other module of `grader`) imports of the sandbox's code the contract alone.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "grader"
STDLIB = set(sys.stdlib_module_names) | {"__future__"}


def imports(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every import in the file, those inside functions included."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"{path}:{node.lineno}: a relative import"
            module = node.module or ""
            # `from grader.confined import restrict` imports the module grader.confined.restrict.
            found += [(node.lineno, f"{module}.{alias.name}" if module in ("grader", "grader.harness",
                                                                            "grader.confined") else module)
                      for alias in node.names]
    return found


def modules(folder: str) -> list[Path]:
    return sorted(path for path in (PACKAGE / folder).rglob("*.py") if "__pycache__" not in path.parts)


def host_modules() -> list[Path]:
    inside = {PACKAGE / "harness", PACKAGE / "confined"}
    return sorted(path for path in PACKAGE.rglob("*.py")
                  if "__pycache__" not in path.parts and not any(folder in path.parents for folder in inside))


def top(module: str) -> str:
    return module.split(".")[0]


def test_each_side_has_modules_to_check():
    assert len(modules("confined")) >= 9 and len(modules("harness")) >= 9 and len(host_modules()) >= 30


@pytest.mark.parametrize("path", modules("confined"), ids=lambda p: p.name)
def test_the_confined_package_imports_only_the_standard_library_and_itself(path):
    wrong = [f"{path.name}:{line}: {module}" for line, module in imports(path)
             if top(module) not in STDLIB and not module.startswith("grader.confined")]
    assert not wrong, wrong


@pytest.mark.parametrize("path", modules("harness"), ids=lambda p: p.name)
def test_the_harness_imports_only_pytest_itself_and_the_confined_package(path):
    allowed = ("grader.harness", "grader.confined", "pytest", "_pytest", "pluggy")
    wrong = [f"{path.name}:{line}: {module}" for line, module in imports(path)
             if top(module) not in STDLIB and not module.startswith(allowed)]
    assert not wrong, wrong


@pytest.mark.parametrize("path", host_modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_the_host_imports_of_the_sandbox_side_the_contract_alone(path):
    wrong = [f"{path.relative_to(PACKAGE)}:{line}: {module}" for line, module in imports(path)
             if module.startswith(("grader.harness", "grader.confined")) and module != "grader.harness.contract"]
    assert not wrong, wrong


def test_the_rules_see_an_import_that_breaks_them(tmp_path):
    """The checks read imports wherever they are, a function's own included."""
    sample = tmp_path / "sample.py"
    sample.write_text("import os\n\ndef later():\n    from grader.harness import client\n    import requests\n")
    assert imports(sample) == [(1, "os"), (4, "grader.harness.client"), (5, "requests")]
