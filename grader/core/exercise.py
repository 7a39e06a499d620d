"""An exercise on disk: `exercises/<slug>/exercise.toml` and the folders around it.

The statement, the stub and the file names are fixed, so adding an exercise never touches grader code:
    exercises/<slug>/         README.md, exercise.toml, the stub
    solutions/<slug>/         the reference (same file name as the submission) and mutants/
Everything else is the exercise's own data in exercise.toml: its suites (each a folder of pytest
files, relative to the project folder, with the label a student sees, its points, whether it may
use the reference, whether its failure details are shown and when Gradescope shows its results), its
tiers (each a list of suites) and the Debian packages its sandbox needs.
"""

from __future__ import annotations

import difflib
import functools
import hashlib
import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from grader.core import page_settings
from grader.core.page_settings import Prediction, WebSettings
from grader.disk_cache import keep, read_cached
from grader.harness.contract import Limits, collection_error

# A course platform's container may run Python 3.10 (Ubuntu 22.04), which has no tomllib: tomli is the same parser.
if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

SLUG = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")
PACKAGE = re.compile(r"^[a-z0-9][a-z0-9+.-]+$")  # a Debian package name
# When a platform that holds results back (Gradescope) shows a suite's results to students: never, after
# the due date, once the instructor publishes the grades, or at once.
VISIBILITIES = ("hidden", "after_due_date", "after_published", "visible")
# What exercise.toml may hold: a misspelt key is refused, never silently left at its default.
TOP_LEVEL_KEYS = ("title", "submission", "names", "default_tier", "max_submission_kb", "limits", "suites",
                  "tiers", "points", "sandbox", "prediction", "web", "similarity", "audit")
TABLE_KEYS = {"sandbox": ("packages",), "prediction": ("question", "choices", "answer", "why", "hides"),
              "web": ("solution", "submission_interval_s", "due", "closes", "late_penalty_per_day", "late_cap",
                      "release"), "similarity": ("given",),
              "audit": ("seeds", "equivalent")}


class ExerciseError(Exception):
    """The exercise cannot be used: missing, malformed, or inconsistent. The message says which."""


@dataclass(frozen=True)
class SuiteSpec:
    name: str
    path: Path
    points: int  # per test unless overridden in [points]
    label: str = ""  # what a student sees: "Visible tests"
    reference: bool = False  # its tests may use the `reference` fixture (the reference ships with the job)
    details: bool = True  # a failed assertion shows its expression when the author wrote no message
    visibility: str = ""  # when Gradescope shows its results to students (VISIBILITIES); "": the default


@dataclass(frozen=True)
class AuditSettings:
    """exercise.toml's [audit]: how many seeds each mutant is graded on, and the generated mutants that
    behave exactly as the reference does (by name, with the reason), which no test can catch."""
    seeds: int = 3
    equivalent: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Exercise:
    slug: str
    title: str
    root: Path  # the project folder holding exercises/, solutions/, hidden_tests/
    submission_file: str
    names: tuple[str, ...]
    limits: Limits
    suites: dict[str, SuiteSpec]
    tiers: dict[str, tuple[str, ...]]  # in the order exercise.toml lists them
    default_tier: str = ""
    points: dict[str, int] = field(default_factory=dict)
    max_submission_bytes: int = 256 * 1024
    packages: tuple[str, ...] = ()  # extra Debian packages the sandbox image needs
    prediction: Prediction | None = None  # the web page's "Before you code" question
    web: WebSettings = field(default_factory=WebSettings)
    # Files students were given besides the stub (exercise.toml's [similarity] given, relative to the
    # exercise's folder): code in them never makes two students look alike.
    given_code: tuple[Path, ...] = ()
    audit: AuditSettings = field(default_factory=AuditSettings)

    @property
    def folder(self) -> Path:
        return self.root / "exercises" / self.slug

    @property
    def module(self) -> str:
        return self.submission_file.removesuffix(".py")

    @property
    def stub(self) -> Path:
        return self.folder / self.submission_file

    @property
    def reference(self) -> Path:
        return self.root / "solutions" / self.slug / self.submission_file

    @property
    def mutants(self) -> list[Path]:
        return sorted((self.root / "solutions" / self.slug / "mutants").glob("*.py"))

    def tier(self, name: str | None) -> str:
        """The tier called `name`, or the default tier for None; an unknown tier is an ExerciseError."""
        if name is None:
            return self.default_tier
        if name not in self.tiers:
            raise ExerciseError(f"unknown tier {name!r}; this exercise has: {', '.join(self.tiers)}")
        return name

    @property
    def top_tier(self) -> str:
        """The tier that runs the most suites (the first declared, on a tie)."""
        return max(self.tiers, key=lambda name: len(set(self.tiers[name])))

    def suites_for(self, tier: str) -> list[SuiteSpec]:
        return [self.suites[name] for name in self.tiers[self.tier(tier)]]

    def needs_reference(self, tier: str) -> bool:
        return any(suite.reference for suite in self.suites_for(tier))

    @property
    def suite_labels(self) -> dict[str, str]:
        return {name: suite.label for name, suite in self.suites.items()}

    @property
    def suite_visibility(self) -> dict[str, str]:
        """The visibility each suite sets in exercise.toml (suites that set none are left out)."""
        return {name: suite.visibility for name, suite in self.suites.items() if suite.visibility}

    @property
    def open_suites(self) -> list[str]:
        """The suites of the tier that runs the fewest (the free tier; the first declared, on a tie):
        every student may see them, so their results are shown at once unless exercise.toml says
        otherwise."""
        return list(self.tiers[min(self.tiers, key=lambda name: len(set(self.tiers[name])))])

    def points_for(self, test_name: str, suite: str) -> int:
        base = test_name.split("[", 1)[0]
        return self.points.get(base, self.suites[suite].points)


def project_root() -> Path:
    """The folder holding `exercises/`: the current folder or a parent, else the one beside the package."""
    for candidate in (Path.cwd(), *Path.cwd().parents, Path(__file__).resolve().parents[2]):
        if (candidate / "exercises").is_dir():
            return candidate
    raise ExerciseError("no exercises/ folder here or in a parent folder; run grader from the project folder")


def load_exercise(slug_or_path: str, root: Path | None = None) -> Exercise:
    """Load by slug (`my_exercise`) or by the exercise folder's path."""
    candidate = Path(slug_or_path)
    if candidate.is_dir() and (candidate / "exercise.toml").is_file():
        folder = candidate.resolve()
        slug, root = folder.name, folder.parent.parent
        if folder.parent.name != "exercises":
            raise ExerciseError(f"{folder} must sit in an exercises/ folder beside solutions/ and hidden_tests/")
        if not SLUG.fullmatch(slug):  # it names report files, gradebooks and store rows
            raise ExerciseError(f"{folder}: the folder's name {slug!r} is the exercise's name, and must be lower-case "
                                "letters, digits, '_' and '-'")
    else:
        if not SLUG.fullmatch(slug_or_path):
            raise ExerciseError(f"{slug_or_path!r} is neither an exercise folder nor a valid exercise name "
                                "(lower-case letters, digits, '_' and '-')")
        slug, root = slug_or_path, (root or project_root())
        folder = root / "exercises" / slug
        if not (folder / "exercise.toml").is_file():
            known = sorted(p.parent.name for p in (root / "exercises").glob("*/exercise.toml"))
            raise ExerciseError(f"no exercise named {slug!r} in {root / 'exercises'}; known: {', '.join(known) or 'none'}")
    try:
        config = tomllib.loads((folder / "exercise.toml").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ExerciseError(f"{folder / 'exercise.toml'}: {exc}") from None
    return _from_config(slug, root, config, folder / "exercise.toml")


Needed = TypeVar("Needed")


def _from_config(slug: str, root: Path, config: dict, source: Path) -> Exercise:
    def need(key: str, kind: type[Needed], what: str) -> Needed:
        if key not in config:
            raise ExerciseError(f"{source}: {key} is missing ({key} = {what})")
        if not isinstance(config[key], kind) or isinstance(config[key], bool):
            raise ExerciseError(f"{source}: {key} must be {what}, not {config[key]!r}")
        value: Needed = config[key]
        return value

    _known_keys(config, TOP_LEVEL_KEYS, "", source)
    for table, keys in TABLE_KEYS.items():
        _known_keys(_table(config, table, source), keys, f"[{table}] ", source)
    title = need("title", str, '"the title students see"')
    submission = need("submission", str, '"the file name a submission is graded as", such as "solution.py"')
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*\.py", submission):
        raise ExerciseError(f"{source}: submission must be a Python file name such as solution.py, not {submission!r}")
    names = need("names", list, '["the", "names", "tests", "ask", "ns", "for"]')
    if not names or not all(isinstance(n, str) and n.isidentifier() for n in names):
        raise ExerciseError(f"{source}: names must list the submission's names the tests use (Python names), "
                            f"not {names!r}")
    try:
        limits = Limits.from_table(config.get("limits", {}))
    except ValueError as exc:
        raise ExerciseError(f"{source}: [limits]: {exc}") from None
    suites = {name: _suite(name, table, root, source) for name, table in _table(config, "suites", source).items()}
    if not suites:
        raise ExerciseError(f"{source}: [suites] must declare at least one suite")
    for one in suites.values():
        for other in suites.values():
            if one is not other and one.path.resolve().is_relative_to(other.path.resolve()):
                # A test file must belong to one suite: its points, reference and details follow from it.
                raise ExerciseError(f"{source}: suite {one.name!r} lies in the folder of suite {other.name!r}")
    tiers: dict[str, tuple[str, ...]] = {}
    for tier, wanted in _table(config, "tiers", source).items():
        if not isinstance(wanted, list) or not wanted or not all(isinstance(s, str) for s in wanted):
            raise ExerciseError(f"{source}: tier {tier!r} must be a list of suite names")
        for suite in wanted:
            if suite not in suites:
                raise ExerciseError(f"{source}: tier {tier!r} runs suite {suite!r}, which [suites] does not define")
        tiers[tier] = tuple(wanted)
    if not tiers:
        raise ExerciseError(f"{source}: [tiers] must declare at least one tier")
    default_tier = config.get("default_tier", list(tiers)[-1])
    if not isinstance(default_tier, str) or default_tier not in tiers:
        raise ExerciseError(f"{source}: default_tier {default_tier!r} is not one of [tiers]: {', '.join(tiers)}")
    packages = _table(config, "sandbox", source).get("packages", [])
    if not isinstance(packages, list) or not all(isinstance(p, str) and PACKAGE.fullmatch(p) for p in packages):
        raise ExerciseError(f"{source}: [sandbox] packages must be a list of Debian package names")
    points = _table(config, "points", source)
    for test, value in points.items():
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise ExerciseError(f"{source}: [points] {test} must be a whole number of points (0 or more), not {value!r}")
    max_kb = config.get("max_submission_kb", 256)
    if not isinstance(max_kb, int) or isinstance(max_kb, bool) or max_kb <= 0:
        raise ExerciseError(f"{source}: max_submission_kb must be a whole number of KiB above 0, not {max_kb!r}")
    _check_file_names(suites, source)
    try:
        prediction = page_settings.prediction(_table(config, "prediction", source))
        web = page_settings.web(_table(config, "web", source))
    except page_settings.SettingError as exc:
        raise ExerciseError(f"{source}: {exc}") from None
    exercise = Exercise(
        slug=slug, title=title, root=root, submission_file=submission,
        names=tuple(str(n) for n in names), limits=limits, suites=suites, tiers=tiers,
        default_tier=default_tier, points=dict(points), max_submission_bytes=int(max_kb) * 1024,
        packages=tuple(sorted(set(packages))), prediction=prediction, web=web,
        given_code=_given_code(_table(config, "similarity", source), root / "exercises" / slug, source),
        audit=_audit_settings(_table(config, "audit", source), source),
    )
    needing = [name for name, suite in suites.items() if suite.reference]
    if needing and not exercise.reference.is_file():
        raise ExerciseError(f"{source}: suite {needing[0]!r} uses the reference solution (reference = true), and "
                            f"there is no {exercise.reference}")
    return exercise


def _audit_settings(table: dict, source: Path) -> AuditSettings:
    seeds = table.get("seeds", AuditSettings.seeds)
    if not isinstance(seeds, int) or isinstance(seeds, bool) or not 1 <= seeds <= 20:
        raise ExerciseError(f"{source}: [audit] seeds is how many seeds each mutant is graded on, 1 to 20, not {seeds!r}")
    equivalent = table.get("equivalent", {})
    if not isinstance(equivalent, dict) or not all(isinstance(v, str) and v.strip() for v in equivalent.values()):
        raise ExerciseError(f"{source}: [audit.equivalent] maps a generated mutant's name (as `grader audit` prints "
                            "it) to the reason no test can tell it from the reference, such as "
                            '"Scheduler.add: a ⇄ b" = "both checks raise the same ValueError"')
    return AuditSettings(seeds, dict(equivalent))


def _given_code(table: dict, folder: Path, source: Path) -> tuple[Path, ...]:
    given = table.get("given", [])
    if not isinstance(given, list) or not all(isinstance(name, str) and name for name in given):
        raise ExerciseError(f"{source}: [similarity] given must be a list of file names in {folder}")
    paths = []
    for name in given:
        path = folder / name
        if not path.resolve().is_relative_to(folder.resolve()) or not path.is_file():
            raise ExerciseError(f"{source}: [similarity] given lists {name!r}, which is no file of {folder}")
        paths.append(path)
    return tuple(paths)


def _known_keys(table: dict, known: tuple[str, ...], where: str, source: Path) -> None:
    """Refuse a key exercise.toml does not define, with the nearest known one."""
    for key in table:
        if key not in known:
            near = difflib.get_close_matches(key, known, n=1)
            hint = f"did you mean {near[0]}?" if near else f"known: {', '.join(known)}"
            raise ExerciseError(f"{source}: {where}unknown key {key!r} ({hint})")


def _check_file_names(suites: dict[str, SuiteSpec], source: Path) -> None:
    """pytest imports a test file (and a helper beside it) by its file name when its folder is not a
    package, so two such files of the same name in an exercise's suites would make one hide the other:
    every grading would fail to collect. Refused here, naming both."""
    seen: dict[str, Path] = {}
    for suite in suites.values():
        for path in sorted(suite.path.rglob("*.py")):
            if path.name in ("conftest.py", "__init__.py") or "__pycache__" in path.parts:
                continue
            if (path.parent / "__init__.py").is_file():
                continue  # in a package: imported by its dotted name
            if path.name in seen:
                raise ExerciseError(f"{source}: two test files are named {path.name}: {seen[path.name]} and {path}; "
                                    "pytest imports them by their file names, so rename one")
            seen[path.name] = path


def _table(config: dict, key: str, source: Path) -> dict:
    table = config.get(key, {})
    if not isinstance(table, dict):
        raise ExerciseError(f"{source}: {key} must be a table ([{key}])")
    return table


def _suite(name: str, table: object, root: Path, source: Path) -> SuiteSpec:
    """One [suites.<name>] table: a folder (relative to the project folder), label, points and flags."""
    where = f"[suites.{name}]"
    if not SLUG.fullmatch(name):
        raise ExerciseError(f"{source}: {where}: a suite name is lower-case letters, digits, '_' and '-'")
    if not isinstance(table, dict):
        raise ExerciseError(f"{source}: {where} must be a table")
    unknown = set(table) - {"folder", "label", "points", "reference", "details", "visibility"}
    if unknown:
        raise ExerciseError(f"{source}: {where} has unknown keys: {', '.join(sorted(unknown))}")
    folder, points = table.get("folder"), table.get("points")
    if not isinstance(folder, str) or not folder or Path(folder).is_absolute() or ".." in Path(folder).parts:
        raise ExerciseError(f"{source}: {where} needs folder = \"...\", relative to the project folder")
    if not (root / folder).is_dir():
        raise ExerciseError(f"{source}: {where}: the folder {root / folder} does not exist")
    if not isinstance(points, int) or isinstance(points, bool) or points < 0:
        raise ExerciseError(f"{source}: {where} needs points = <a whole number, 0 or more>, the points of each "
                            f"test{'' if points is None else f', not {points!r}'}")
    label = table.get("label", f"{name} tests")
    if not isinstance(label, str):
        raise ExerciseError(f"{source}: {where}: label is text, not {label!r}")
    flags = {key: table.get(key, default) for key, default in (("reference", False), ("details", True))}
    for key, value in flags.items():
        if not isinstance(value, bool):
            raise ExerciseError(f"{source}: {where}: {key} is true or false, not {value!r}")
    visibility = table.get("visibility", "")
    if "visibility" in table and visibility not in VISIBILITIES:
        raise ExerciseError(f"{source}: {where}: visibility is one of {', '.join(VISIBILITIES)} (when Gradescope "
                            f"shows this suite's results to students), not {visibility!r}")
    return SuiteSpec(name, root / folder, points, label, flags["reference"], flags["details"], visibility)


def files_fingerprint(paths: list[Path]) -> tuple[tuple[str, int, int], ...]:
    """What tells changed files from unchanged ones without reading them: names, sizes, times."""
    found = []
    for path in paths:
        for file in ([path] if path.is_file() else sorted(path.rglob("*")) if path.is_dir() else []):
            stat = file.stat()
            found.append((str(file), stat.st_size, stat.st_mtime_ns))
    return tuple(found)


_fingerprints: dict[str, tuple[tuple[tuple[str, int, int], ...], str]] = {}


@functools.cache
def judging_code_digest() -> str:
    """A digest of the code that judges a submission: the harness, which runs the suites, drives the
    workers and turns outcomes into results (its files as this process has them; a version number alone
    stays the same across changes to them)."""
    import grader

    digest = hashlib.sha256(f"grader {grader.__version__}\0".encode())
    harness = Path(grader.__file__).parent / "harness"
    for file in sorted(harness.rglob("*.py")):
        digest.update(file.relative_to(harness).as_posix().encode() + b"\0" + file.read_bytes() + b"\0")
    return digest.hexdigest()


# exercise.toml's settings that decide nothing of a grade: the title, the default tier (a scorecard names
# its tier), the question before the editor, the web page's settings (the due and closing dates among
# them), the similarity report's and the audit's; and of each suite, how its results are shown (its label,
# its Gradescope visibility), not what they are.
NOT_GRADING = ("title", "default_tier", "prediction", "web", "similarity", "audit")
SUITE_NOT_GRADING = ("label", "visibility")


def grading_settings(toml: Path) -> bytes:
    """exercise.toml's settings that decide a grade (the submission's name and names, its size limit, the
    limits, the suites, tiers, points and sandbox packages), in one canonical form: a comment, the order of
    the keys or an edit of a setting in NOT_GRADING leaves it the same."""
    try:
        config = tomllib.loads(toml.read_text(encoding="utf-8"))
    except OSError:
        return b""
    except (UnicodeDecodeError, tomllib.TOMLDecodeError):
        return toml.read_bytes()  # the exercise cannot load as it is: any change of it counts
    kept = {key: value for key, value in config.items() if key not in NOT_GRADING}
    suites = kept.get("suites")
    if isinstance(suites, dict):
        kept["suites"] = {name: {key: value for key, value in table.items() if key not in SUITE_NOT_GRADING}
                          if isinstance(table, dict) else table for name, table in suites.items()}
    return json.dumps(kept, sort_keys=True, default=str).encode()


def exercise_fingerprint(exercise: Exercise) -> str:
    """A digest of everything a grading of this exercise depends on besides the submission: the code that
    judges (`judging_code_digest`), exercise.toml's grading settings (`grading_settings`: never its dates
    or its page's text), every suite's files and the reference. A result with another fingerprint was
    graded against another suite or by another grader (`batch` grades such results again, the service's
    dashboard offers a regrade). Read again only when a file's name, size or time changed."""
    toml = exercise.folder / "exercise.toml"
    graded_by = [*(suite.path for suite in exercise.suites.values()), exercise.reference]
    stat = files_fingerprint([toml, *graded_by])
    known = _fingerprints.get(str(toml))
    if known is not None and known[0] == stat:
        return known[1]
    digest = hashlib.sha256(f"{judging_code_digest()}\0".encode())
    digest.update(b"exercise.toml\0" + grading_settings(toml) + b"\0")
    for path in graded_by:
        files = [path] if path.is_file() else sorted(path.rglob("*")) if path.is_dir() else []
        for file in files:
            if file.is_file() and "__pycache__" not in file.parts:
                name = file.relative_to(exercise.root) if file.is_relative_to(exercise.root) else file
                digest.update(name.as_posix().encode() + b"\0" + file.read_bytes() + b"\0")
    _fingerprints[str(toml)] = (stat, digest.hexdigest()[:16])
    return digest.hexdigest()[:16]


_listed: dict[str, tuple[tuple[tuple[str, int, int], ...], tuple[str, ...]]] = {}


def list_tests(suite: SuiteSpec) -> list[str]:
    """The tests of a suite as the scorecard names them: pytest's id without the file (`test_x[case]` for
    each parametrized case, `TestClass::test_x` for a test in a class)."""
    return [test_id.split("::", 1)[1] for test_id in list_test_ids(suite)]


def list_test_ids(suite: SuiteSpec) -> list[str]:
    """The tests of a suite as pytest names them from the suite's folder (`test_file.py::test_x`).

    pytest collects them on the host, from the exercise's own (trusted) files: it imports the suite,
    never a submission. Used to name the premium tests a free run did not run, to state the points at
    stake when a submission is refused, and to check that every test of a run reported a result. A
    process lists an unchanged suite once (its files' names, sizes and times tell); a new process finds
    the list on disk by the suite's content.
    """
    fingerprint = files_fingerprint([suite.path])
    known = _listed.get(str(suite.path))
    if known is not None and known[0] == fingerprint:
        return list(known[1])
    digest = hashlib.sha256(b"test ids\0")
    for path in sorted(suite.path.rglob("*.py")):
        if "__pycache__" not in path.parts:
            digest.update(path.relative_to(suite.path).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    ids = _collect(str(suite.path), digest.hexdigest())
    _listed[str(suite.path)] = (fingerprint, ids)
    return list(ids)


def check_tests(exercise: Exercise) -> None:
    """What only the collected tests show: every test's name is its own across the exercise's suites (the
    scorecard, the gradebook's columns, the list of locked tests and [points] know a test by its name),
    and every [points] entry names a test. An ExerciseError says what to change."""
    where: dict[str, str] = {}
    for suite in exercise.suites.values():
        for test_id in list_test_ids(suite):
            file, name = test_id.split("::", 1)
            place = str(suite.path / file)
            if name in where:
                raise ExerciseError(f"{exercise.folder / 'exercise.toml'}: two tests are named {name}, in {where[name]} "
                                    f"and {place}; a test is known by its name (scorecards, gradebooks, [points]), "
                                    "so rename one")
            where[name] = place
    bases = {name.split("[", 1)[0] for name in where}
    for key in exercise.points:
        if key not in bases:
            near = difflib.get_close_matches(key, sorted(bases), n=1)
            hint = f"did you mean {near[0]}?" if near else "no test has that name"
            raise ExerciseError(f"{exercise.folder / 'exercise.toml'}: [points] {key} names no test of the exercise "
                                f"({hint})")


def _collection_errors(output: str) -> str:
    """Each file pytest could not collect, with its error's own lines (`contract.collection_error`)."""
    sections = re.split(r"^_+ ERROR collecting (.+?) _+$", output.split("= short test summary info =")[0], flags=re.M)
    found = [f"{name}: {collection_error(body)}" for name, body in zip(sections[1::2], sections[2::2])]
    return "\n".join(found) if found else output[-2000:]


@functools.lru_cache(maxsize=64)
def _collect(folder: str, digest: str) -> tuple[str, ...]:
    """pytest's collection of `folder`, kept on disk by the suite's content (a collection costs a whole
    pytest start), so that every grading of an unchanged suite reuses it."""
    cache = f"tests-{digest}.json"
    kept = read_cached(cache)
    try:
        names = json.loads(kept) if kept is not None else None
        if isinstance(names, list) and all(isinstance(n, str) for n in names):
            return tuple(names)
    except ValueError:
        pass
    # The path this process found pytest on (a platform bundle's own folder of packages, say), as the harness gets.
    path = os.pathsep.join(entry for entry in sys.path[1:] if entry)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
           "PYTHONDONTWRITEBYTECODE": "1", "PYTHONPATH": path}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "-c", os.devnull,
         "--rootdir", folder, "--confcutdir", folder, folder],  # no conftest.py from the folders around it
        capture_output=True, text=True, env=env, cwd=folder, timeout=120)
    if done.returncode not in (0, 5):
        raise ExerciseError(f"the suite in {folder} cannot be collected:\n{_collection_errors(done.stdout)}")
    found = tuple(line for line in done.stdout.splitlines() if "::" in line)
    keep(cache, json.dumps(list(found)).encode())
    return found
