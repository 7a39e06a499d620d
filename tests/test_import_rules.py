"""The trust boundary in the tree: what each side of the sandbox may import.

- `grader.confined` (the code that runs beside the submission) imports only the standard library and
  itself: it is what ships into the confinement, whole, and nothing else is on a worker's path.
- `grader.harness` (the trusted in-sandbox side) imports the standard library, pytest, itself and the
  confined package: the sandbox holds nothing else of the grader.
- The host (every other module of `grader`) imports of the sandbox's code the contract alone, and the
  line that starts a sandbox's Python (`grader.harness.start`, light enough to import before anything else).

And the host's layers (`FLOORS`), each importing only what lies on the floors below it, never a package
on its own floor or above: `core` (an exercise, its grading, the scorecard, the `Backend` protocol the
sandboxes implement) knows no sandbox, and no sandbox the grading that uses it; `core` knows no
diagnosis either (whoever grades for a person passes it in); `report` knows no course, service, web
page or LMS; the web knows no LMS (grader/lti, above it, hands its pages in); the command line is the
top, where they are all put together (under the `grader` command's own start, `grader/__main__.py`).
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

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
             if module.startswith(("grader.harness", "grader.confined"))
             and module not in ("grader.harness.contract", "grader.harness.start")]
    assert not wrong, wrong


# The host's packages (and top-level modules) from the ground up. A package imports only those on the
# floors below its own: two on one floor know nothing of each other.
FLOORS = [
    ("errors", "disk_cache", "private_files"),
    ("db", "text"),
    ("core",),
    ("sandbox", "diagnosis"),
    ("report",),
    ("audit",),
    ("course",),
    ("service", "similarity"),
    ("web",),
    ("lti", "bundles"),
    ("cli",),
    ("__main__",),
]
# What each layer of the host may not import: every package on its floor or above, itself aside.
LAYERS = {layer: tuple(f"grader.{other}" for above in FLOORS[floor:] for other in above if other != layer)
          for floor, layers in enumerate(FLOORS) for layer in layers}
# Below its floor too, a sandbox knows of the grading the protocol it implements (grader.core.backend) alone.
LAYERS["sandbox"] += ("grader.core.grading",)


def within(module: str, packages: tuple[str, ...]) -> bool:
    return any(module == package or module.startswith(f"{package}.") for package in packages)


def layer_modules(layer: str) -> list[Path]:
    return modules(layer) if (PACKAGE / layer).is_dir() else [PACKAGE / f"{layer}.py"]


@pytest.mark.parametrize(("layer", "path"), [(layer, path) for layer in LAYERS for path in layer_modules(layer)],
                         ids=lambda value: str(value.relative_to(PACKAGE)) if isinstance(value, Path) else value)
def test_each_layer_imports_nothing_of_the_layers_above_it(layer, path):
    wrong = [f"{path.relative_to(PACKAGE)}:{line}: {module}" for line, module in imports(path)
             if within(module, LAYERS[layer])]
    assert not wrong, wrong


def test_each_layer_has_modules_to_check():
    """The rules read real files: each package of a layer has modules of its own beside its __init__.py."""
    assert all(len([path for path in modules(layer) if path.name != "__init__.py"]) >= 3
               for layer in LAYERS if (PACKAGE / layer).is_dir())
    assert all(path.is_file() for layer in LAYERS for path in layer_modules(layer))


def test_every_package_of_the_host_stands_on_a_floor():
    """A new package (or top-level module) of the host is given its place among the layers before it is used."""
    host = {path.stem for path in PACKAGE.iterdir() if path.suffix == ".py" and path.stem != "__init__"}
    host |= {path.name for path in PACKAGE.iterdir() if (path / "__init__.py").is_file()}
    assert host - {"harness", "confined"} == set(LAYERS)


def test_the_floors_keep_the_grading_from_the_sandboxes_and_the_diagnosis_and_the_web_from_lti():
    assert within("grader.sandbox.local", LAYERS["core"]) and within("grader.audit.match", LAYERS["core"])
    assert within("grader.core.grading", LAYERS["sandbox"]) and not within("grader.core.backend", LAYERS["diagnosis"])
    assert within("grader.lti.mount", LAYERS["web"]) and not within("grader.web.app", LAYERS["lti"])
    assert within("grader.bundles", LAYERS["lti"]) and within("grader.lti", LAYERS["bundles"])


def test_the_layer_rule_sees_the_command_line_and_a_package_above(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text("from grader import cli\nimport grader.web.app\nimport grader.webby\n")
    assert [module for _, module in imports(sample) if within(module, LAYERS["core"])] == ["grader.cli", "grader.web.app"]


def test_the_rules_see_an_import_that_breaks_them(tmp_path):
    """The checks read imports wherever they are, a function's own included."""
    sample = tmp_path / "sample.py"
    sample.write_text("import os\n\ndef later():\n    from grader.harness import client\n    import requests\n")
    assert imports(sample) == [(1, "os"), (4, "grader.harness.client"), (5, "requests")]


# The modules that speak the worker's wire, on either side of it.
WIRE_MODULES = ["confined/worker.py", "confined/objects.py", "harness/client.py", "harness/codec.py",
                "harness/proxies.py", "harness/scenario.py"]


# The modules that send or read the control sockets' messages (the zygote's, the loader's, the fork server's).
CONTROL_MODULES = ["confined/zygote.py", "confined/loader.py", "confined/forking.py", "harness/confine.py",
                   "harness/forkserver.py", "sandbox/forkservers.py"]


def wire_keys(module: str = "protocol") -> set[str]:
    """The keys, ops and tags a module of the wire declares: every string constant of its own."""
    import importlib
    declared = importlib.import_module(f"grader.confined.{module}")
    return {value for name, value in vars(declared).items() if name.isupper() and type(value) is str}


def bare_wire_strings(path: Path, keys: set[str]) -> list[str]:
    """Where a file spells a wire key as a literal where the protocol reads it: a dict's key, a
    subscript, a comparison, an argument of `.get` or an element of a list built as a message."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        places: list[ast.expr] = []
        if isinstance(node, ast.Dict):
            places = [key for key in node.keys if key is not None]
        elif isinstance(node, ast.Subscript):
            places = [node.slice]
        elif isinstance(node, ast.Compare):
            places = [node.left, *node.comparators]
            places += [e for c in node.comparators if isinstance(c, (ast.Tuple, ast.List, ast.Set)) for e in c.elts]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get":
            places = node.args[:1]
        elif isinstance(node, ast.List):
            places = node.elts[:1]
        found += [f"{path.name}:{place.lineno}: {place.value!r}" for place in places
                  if isinstance(place, ast.Constant) and place.value in keys]
    return found


@pytest.mark.parametrize("relative", WIRE_MODULES)
def test_the_wire_is_spoken_in_the_protocols_declared_keys_only(relative):
    assert not bare_wire_strings(PACKAGE / relative, wire_keys())


@pytest.mark.parametrize("relative", CONTROL_MODULES)
def test_the_control_sockets_speak_in_their_declared_keys_only(relative):
    assert not bare_wire_strings(PACKAGE / relative, wire_keys("control"))


def test_the_wire_check_sees_a_bare_key(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text('reply = {"ok": 1}\nif reply.get("exc"):\n    pass\nop = ["new", "Scheduler"]\n'
                      'kind = reply["too_big"]\nok = reply == "part"\n')
    assert [line.split(":")[1] for line in bare_wire_strings(sample, wire_keys())] == ["1", "2", "4", "5", "6"]
