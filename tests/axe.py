"""axe-core in the browser tests: WCAG 2.1 AA checked on a page as Chromium renders it.

axe-core is npm's package, pinned in tests/axe/package.json and installed into tests/axe/node_modules
(`.ci/run` does it: `npm ci --prefix tests/axe`). The `axe` fixture hands its script to the tests; without
it they skip, except under CI=true, where that fails. `check_page(page, axe)` runs the rules of WCAG 2.0 and
2.1, levels A and AA, on the page as it is now, in the light and the dark colour scheme (every page declares
both), and fails with each violation listed: its rule, the elements it found (CSS selectors) and axe's
summary of what to fix. At the phone's width every box that scrolls must also take the focus and, but
for a block of code, have a name (WCAG 2.1.1): axe lets one pass when a link inside it can take the
focus, but what lies past that link is then out of the keyboard's reach. The script is evaluated through
the DevTools protocol, so the pages' Content Security Policy (no script at all) stays as it is.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any

import pytest

from tests.helpers import PROJECT

AXE_SCRIPT = PROJECT / "tests" / "axe" / "node_modules" / "axe-core" / "axe.min.js"
# WCAG 2.0 and 2.1 at levels A and AA: the target of docs/accessibility.md.
TAGS = ("wcag2a", "wcag2aa", "wcag21a", "wcag21aa")
SCHEMES = ("light", "dark")
PHONE = (390, 844)
# The boxes on the page that scroll (their content wider or taller than they are) but that the keyboard
# cannot focus, or that have no name (a block of code, <pre>, needs none: it is read as the code it holds);
# form fields, which scroll their own text, are left to axe.
UNREACHABLE_SCROLLERS = """() => [...document.body.querySelectorAll('*')].filter(el => {
  if (el.matches('input, textarea, select')) return false;
  const style = getComputedStyle(el);
  const scrolls = (['auto', 'scroll'].includes(style.overflowX) && el.scrollWidth > el.clientWidth + 1)
               || (['auto', 'scroll'].includes(style.overflowY) && el.scrollHeight > el.clientHeight + 1);
  const named = (el.getAttribute('aria-label') || el.getAttribute('aria-labelledby') || '').trim() !== '';
  return scrolls && (el.tabIndex < 0 || !(named || el.tagName === 'PRE'));
}).map(el => el.tagName.toLowerCase() + (el.id ? '#' + el.id : '') + (el.className ? '.' + el.className : '')
             + ' in ' + (el.closest('section, main, body').id || el.closest('section, main, body').tagName))"""


@dataclass(frozen=True)
class Violation:
    """One rule broken on one element, as axe reports it."""

    scheme: str
    rule: str
    impact: str
    help: str
    target: str
    summary: str

    def __str__(self) -> str:
        summary = " / ".join(line.strip() for line in self.summary.splitlines() if line.strip())
        return f"[{self.scheme}] {self.rule} ({self.impact}): {self.help}\n    at {self.target}\n    {summary}"


@pytest.fixture(scope="session")
def axe() -> str:
    """axe-core's script, from tests/axe/node_modules (`npm ci --prefix tests/axe`)."""
    if not AXE_SCRIPT.is_file():
        message = f"axe-core is not installed ({AXE_SCRIPT} is missing: npm ci --prefix tests/axe)"
        if os.environ.get("CI", "").strip().lower() == "true":
            pytest.fail(f"CI=true but {message}", pytrace=False)
        pytest.skip(message)
    return AXE_SCRIPT.read_text(encoding="utf-8")


def violations(page: Any, script: str, scheme: str = "light") -> list[Violation]:
    """What axe finds on `page` as it is now, shown in `scheme`; the script is loaded once per document."""
    page.emulate_media(color_scheme=scheme)
    if not page.evaluate("() => typeof window.axe === 'object'"):
        page.evaluate(script)
    options = {"runOnly": {"type": "tag", "values": list(TAGS)}, "resultTypes": ["violations"]}
    found = page.evaluate("options => window.axe.run(document, options).then(r => r.violations)", options)
    return [Violation(scheme, v["id"], v.get("impact") or "", v["help"], json.dumps(node["target"]),
                      node.get("failureSummary") or "")
            for v in found for node in v["nodes"]]


def check_page(page: Any, script: str, what: str = "") -> None:
    """Fail, listing every violation, unless axe finds none on `page`: in both colour schemes, with its folded
    <details> open too (axe checks only what is shown), and at a phone's width (where wide tables and code
    scroll in their boxes). The page is left as it was found: light, its details as they were, its width."""
    found: dict[tuple[str, str, str], Violation] = {}

    def run(schemes: tuple[str, ...] = SCHEMES) -> None:
        for scheme in schemes:
            for v in violations(page, script, scheme):
                found.setdefault((v.scheme, v.rule, v.target), v)

    run()
    folded = page.evaluate("() => { const shut = [...document.querySelectorAll('details:not([open])')];"
                           " shut.forEach(d => { d.open = true; d.dataset.axeOpened = '1'; }); return shut.length; }")
    if folded:
        run()
    size = page.viewport_size
    page.set_viewport_size({"width": PHONE[0], "height": PHONE[1]})
    run(("light",))
    for where in page.evaluate(UNREACHABLE_SCROLLERS):
        found.setdefault(("light", "scroller-focusable", where),
                         Violation("light", "scroller-focusable", "serious",
                                   "A box that scrolls must take the focus (tabindex=0) and, but for code, have a name", where, ""))
    page.set_viewport_size(size)
    if folded:
        page.evaluate("() => document.querySelectorAll('details[data-axe-opened]').forEach(d => {"
                      " d.open = false; delete d.dataset.axeOpened; })")
    page.emulate_media(color_scheme="light")
    if found:
        listed = "\n".join(f"  {v}" for v in found.values())
        pytest.fail(f"axe found {len(found)} violation(s) of WCAG 2.1 AA on {what or page.url}:\n{listed}",
                    pytrace=False)
