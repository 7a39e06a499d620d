"""An exercise on disk: `exercises/<slug>/exercise.toml` and the folders around it.

The statement, the stub and the file names are fixed, so adding an exercise never touches grader code:
    exercises/<slug>/         README.md, exercise.toml, the stub
    solutions/<slug>/         the reference (same file name as the submission), mutants/ and variants/
Everything else is the exercise's own data in exercise.toml: its suites (each a folder of pytest
files, relative to the project folder, with the label a student sees, its points, whether it may
use the reference, whether its failure details are shown and when Gradescope shows its results), its
tiers (each a list of suites) and the Debian packages its sandbox needs. Every key it may hold is
declared in EXERCISE_TOML below (its types, default, checks and sentences; [web] and [prediction] in
page_settings) and read by grader.core.toml_specs, so a mistake is named with the file and the key.
What a grading of it depends on, as a digest, is `fingerprint`'s; its suites' tests, as pytest collects
them, are `suite_tests`'s.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grader.core import page_settings
from grader.core.page_settings import Prediction, WebSettings
from grader.core.toml_specs import TABLE_SAYS, Check, Field, Refused, Table, keys_of, read, rule
from grader.harness.contract import Limits

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
        """The author's mutants as files, in name order: each whole file as it is, each change
        (`NN_name.diff`) as the file it makes of the reference (grader/core/mutant_files.py)."""
        from grader.core.mutant_files import mutant_paths

        return mutant_paths(self.root / "solutions" / self.slug / "mutants", self.reference)

    @property
    def mutant_sources(self) -> list[Path]:
        """The files of solutions/<slug>/mutants/ as the author keeps them: whole files and changes."""
        from grader.core.mutant_files import CHANGE_SUFFIX

        folder = self.root / "solutions" / self.slug / "mutants"
        return sorted(path for path in folder.glob("*") if path.suffix in (".py", CHANGE_SUFFIX))

    @property
    def variants(self) -> list[Path]:
        """Correct solutions in other styles than the reference's (solutions/<slug>/variants/*.py): the
        audit grades each (full marks, as the reference) and makes mutants of it too."""
        return sorted((self.root / "solutions" / self.slug / "variants").glob("*.py"))

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


def _from_config(slug: str, root: Path, config: dict[str, Any], source: Path) -> Exercise:
    context = {"slug": slug, "root": root, "exercise_folder": root / "exercises" / slug}
    try:
        exercise: Exercise = read(config, EXERCISE_TOML, context)
    except Refused as refused:
        raise ExerciseError(f"{source}: {refused}") from None
    return exercise


# exercise.toml, key by key. The checks of one key see the keys declared before it (by the name they
# are kept under): the tiers see the suites, the default tier the tiers.

def _needed(key: str, kind: type, what: str, **more: Any) -> Field:
    """A key that must be written, and what it must be: `what`, as written in exercise.toml."""
    return Field(key, (kind,), f"{key} must be {what}, not {{value!r}}", missing=f"{key} is missing ({key} = {what})",
                 **more)


def _nested(suites: dict[str, SuiteSpec]) -> str:
    """A suite whose folder lies in another's; "" when none does. A test file must belong to one suite:
    its points, reference and details follow from it."""
    for one in suites.values():
        for other in suites.values():
            if one is not other and one.path.resolve().is_relative_to(other.path.resolve()):
                return f"suite {one.name!r} lies in the folder of suite {other.name!r}"
    return ""


def _same_file_names(suites: dict[str, SuiteSpec]) -> str:
    """pytest imports a test file (and a helper beside it) by its file name when its folder is not a
    package, so two such files of the same name in an exercise's suites would make one hide the other:
    every grading would fail to collect. Refused, naming both; "" when no two share a name."""
    seen: dict[str, Path] = {}
    for suite in suites.values():
        for path in sorted(suite.path.rglob("*.py")):
            if path.name in ("conftest.py", "__init__.py") or "__pycache__" in path.parts:
                continue
            if (path.parent / "__init__.py").is_file():
                continue  # in a package: imported by its dotted name
            if path.name in seen:
                return (f"two test files are named {path.name}: {seen[path.name]} and {path}; "
                        "pytest imports them by their file names, so rename one")
            seen[path.name] = path
    return ""


def _undefined_suite(tier: tuple[str, ...], known: Mapping[str, Any]) -> str:
    missing = next(suite for suite in tier if suite not in known["suites"])
    return f"tier {known['key']!r} runs suite {missing!r}, which [suites] does not define"


def _not_given(given: list[str], known: Mapping[str, Any]) -> str:
    folder = known["exercise_folder"]
    name = next(name for name in given if not _is_given(name, folder))
    return f"[similarity] given lists {name!r}, which is no file of {folder}"


def _is_given(name: str, folder: Path) -> bool:
    path = folder / name
    return path.resolve().is_relative_to(folder.resolve()) and path.is_file()


def _reference_missing(values: Mapping[str, Any], known: Mapping[str, Any]) -> bool:
    return any(suite.reference for suite in values["suites"].values()) and not _reference(values, known).is_file()


def _no_reference(values: Mapping[str, Any], known: Mapping[str, Any]) -> str:
    needing = next(name for name, suite in values["suites"].items() if suite.reference)
    return (f"suite {needing!r} uses the reference solution (reference = true), and there is no "
            f"{_reference(values, known)}")


def _reference(values: Mapping[str, Any], known: Mapping[str, Any]) -> Path:
    path: Path = Path(known["root"]) / "solutions" / known["slug"] / values["submission_file"]
    return path


_FOLDER = '{at} needs folder = "...", relative to the project folder'
_POINTS = "{at} needs points = <a whole number, 0 or more>, the points of each test"
_FLAG = "{at}: {key} is true or false, not {value!r}"
_VISIBILITY = ("{at}: visibility is one of " + ", ".join(VISIBILITIES) + " (when Gradescope shows this suite's "
               "results to students), not {value!r}")

# One [suites.<name>] table: a folder (relative to the project folder), label, points and flags.
SUITE = Table("[suites.{name}]", (
    Field("folder", (str,), _FOLDER, checks=(
        rule(lambda folder: bool(folder) and not Path(folder).is_absolute() and ".." not in Path(folder).parts,
             _FOLDER),
        Check(lambda folder, known: (known["root"] / folder).is_dir(),
              lambda folder, known: f"{known['at']}: the folder {known['root'] / folder} does not exist"))),
    Field("label", (str,), "{at}: label is text, not {value!r}", default_from=lambda known: f"{known['name']} tests",
          grades=False),
    Field("points", (int,), _POINTS + ", not {value!r}", missing=_POINTS,
          checks=(rule(lambda points: points >= 0, _POINTS + ", not {value!r}"),)),
    Field("reference", (bool,), _FLAG, default=False),
    Field("details", (bool,), _FLAG, default=True),
    Field("visibility", (str,), _VISIBILITY, default=None, grades=False,
          checks=(rule(lambda visibility: visibility in VISIBILITIES, _VISIBILITY),)),
), build=lambda values, known: SuiteSpec(
    known["name"], known["root"] / values["folder"], values["points"], values["label"], values["reference"],
    values["details"], values["visibility"] or ""),
    unknown="{at} has unknown keys: {keys} ({hint})")

_TIER = "tier {key!r} must be a list of suite names"
_PACKAGES = "[sandbox] packages must be a list of Debian package names"
_GIVEN = "[similarity] given must be a list of file names in {exercise_folder}"
_SEEDS = "[audit] seeds is how many seeds each mutant is graded on, 1 to 20, not {value!r}"
_EQUIVALENT = ("[audit.equivalent] maps a generated mutant's name (as `grader audit` prints it) to the reason no "
               'test can tell it from the reference, such as "Scheduler.add: a ⇄ b" = "both checks raise the same '
               'ValueError"')


def _default_tier_says(tier: object, known: Mapping[str, Any]) -> str:
    return f"default_tier {tier!r} is not one of [tiers]: {', '.join(known['tiers'])}"


EXERCISE_TOML = Table("", (
    _needed("title", str, '"the title students see"', grades=False),
    _needed("submission", str, '"the file name a submission is graded as", such as "solution.py"',
            into="submission_file", checks=(rule(
                lambda name: re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*\.py", name) is not None,
                "submission must be a Python file name such as solution.py, not {value!r}"),)),
    _needed("names", list, '["the", "names", "tests", "ask", "ns", "for"]',
            checks=(rule(lambda names: bool(names) and all(isinstance(n, str) and n.isidentifier() for n in names),
                         "names must list the submission's names the tests use (Python names), not {value!r}"),),
            convert=lambda names: tuple(str(n) for n in names)),
    Field("limits", (dict,), TABLE_SAYS, default={}, convert=Limits.from_table, refused="[limits]: {error}"),
    Field("suites", (dict,), TABLE_SAYS, default={},
          each=Field("suite", (dict,), "[suites.{name}] must be a table", table=SUITE),
          names=(rule(lambda name: SLUG.fullmatch(name) is not None,
                      "[suites.{name}]: a suite name is lower-case letters, digits, '_' and '-'"),),
          checks=(rule(bool, "[suites] must declare at least one suite"),
                  Check(lambda suites, known: not _nested(suites), lambda suites, known: _nested(suites)),
                  Check(lambda suites, known: not _same_file_names(suites),
                        lambda suites, known: _same_file_names(suites)))),
    Field("tiers", (dict,), TABLE_SAYS, default={},
          each=Field("tier", (list,), _TIER, convert=tuple, checks=(
              rule(lambda tier: bool(tier) and all(isinstance(suite, str) for suite in tier), _TIER),
              Check(lambda tier, known: all(suite in known["suites"] for suite in tier), _undefined_suite))),
          checks=(rule(bool, "[tiers] must declare at least one tier"),)),
    Field("default_tier", (str,), _default_tier_says, default_from=lambda known: list(known["tiers"])[-1],
          checks=(Check(lambda tier, known: tier in known["tiers"], _default_tier_says),), grades=False),
    Field("sandbox", (dict,), TABLE_SAYS, default={}, into="packages", table=Table("[sandbox] ", (
        Field("packages", (list,), _PACKAGES, default=[],
              checks=(rule(lambda packages: all(isinstance(p, str) and PACKAGE.fullmatch(p) for p in packages),
                           _PACKAGES),)),
    ), build=lambda values, known: tuple(sorted(set(values["packages"]))))),
    Field("points", (dict,), TABLE_SAYS, default={}, each=Field(
        "points", (int,), "[points] {key} must be a whole number of points (0 or more), not {value!r}",
        checks=(rule(lambda points: points >= 0,
                     "[points] {key} must be a whole number of points (0 or more), not {value!r}"),))),
    Field("max_submission_kb", (int,), "max_submission_kb must be a whole number of KiB above 0, not {value!r}",
          default=256, into="max_submission_bytes", convert=lambda kb: kb * 1024,
          checks=(rule(lambda size: size > 0, "max_submission_kb must be a whole number of KiB above 0, "
                                              "not {value!r}"),)),
    Field("prediction", (dict,), TABLE_SAYS, default={}, table=page_settings.PREDICTION, grades=False),
    Field("web", (dict,), TABLE_SAYS, default={}, table=page_settings.WEB, grades=False),
    # Files students were given besides the stub: code in them never makes two students look alike.
    Field("similarity", (dict,), TABLE_SAYS, default={}, into="given_code", grades=False, table=Table(
        "[similarity] ", (
            Field("given", (list,), _GIVEN, default=[], checks=(
                rule(lambda given: all(isinstance(name, str) and name for name in given), _GIVEN),
                Check(lambda given, known: all(_is_given(name, known["exercise_folder"]) for name in given),
                      _not_given))),
        ), build=lambda values, known: tuple(known["exercise_folder"] / name for name in values["given"]))),
    Field("audit", (dict,), TABLE_SAYS, default={}, grades=False, table=Table("[audit] ", (
        Field("seeds", (int,), _SEEDS, default=AuditSettings.seeds,
              checks=(rule(lambda seeds: 1 <= seeds <= 20, _SEEDS),)),
        Field("equivalent", (dict,), _EQUIVALENT, default={},
              checks=(rule(lambda equivalent: all(isinstance(why, str) and why.strip()
                                                  for why in equivalent.values()), _EQUIVALENT),)),
    ), build=lambda values, known: AuditSettings(values["seeds"], dict(values["equivalent"])))),
), checks=(Check(lambda values, known: not _reference_missing(values, known), _no_reference),),
    build=lambda values, known: Exercise(slug=known["slug"], root=known["root"], **values))

# What exercise.toml may hold: a misspelt key is refused, never silently left at its default.
TOP_LEVEL_KEYS = keys_of(EXERCISE_TOML)
