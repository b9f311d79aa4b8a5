"""Read pytest's JUnit XML into per-part results for `mlx-builder test`."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

_COLLECTION_SKIP = re.compile(r"Skipped: (?P<reason>.*?)['\"]?\)?\s*$", re.S)


@dataclass(frozen=True)
class Case:
    name: str
    classname: str
    outcome: str  # passed | failed | error | skipped
    message: str = ""
    seconds: float = 0.0
    properties: tuple[tuple[str, str], ...] = ()


@dataclass
class JUnitReport:
    cases: list[Case] = field(default_factory=list)
    seconds: float = 0.0

    def count(self, outcome: str) -> int:
        return sum(1 for c in self.cases if c.outcome == outcome)

    @property
    def counts(self) -> dict[str, int]:
        return {o: self.count(o) for o in ("passed", "failed", "error", "skipped")}

    def skip_reasons(self) -> list[tuple[str, int]]:
        """Distinct skip reasons, most frequent first."""
        reasons = Counter(c.message for c in self.cases if c.outcome == "skipped")
        return reasons.most_common()

    def problems(self) -> list[Case]:
        return [c for c in self.cases if c.outcome in ("failed", "error")]

    def properties(self) -> dict[str, str]:
        """Every recorded property (record_property), last one wins."""
        out: dict[str, str] = {}
        for case in self.cases:
            out.update(case.properties)
        return out


def skip_reason(message: str, text: str) -> str:
    """The human reason of a skip. A module-level skip is reported as
    message 'collection skipped' with the text "('file', line, 'Skipped: …')"."""
    for candidate in (message, text):
        if candidate and candidate.lstrip().startswith("("):
            m = _COLLECTION_SKIP.search(candidate)
            if m:
                return m.group("reason").strip()
    if message and message != "collection skipped":
        return message.strip()
    m = _COLLECTION_SKIP.search(text or "")
    if m:
        return m.group("reason").strip()
    return (text or message or "skipped").strip()


def _first_line(text: str | None, limit: int = 300) -> str:
    for line in (text or "").splitlines():
        if line.strip():
            return line.strip()[:limit]
    return ""


def _case(elem: ET.Element) -> Case:
    props = tuple((p.get("name", ""), p.get("value", ""))
                  for p in elem.iter("property"))
    outcome, message = "passed", ""
    for tag in ("failure", "error", "skipped"):
        child = elem.find(tag)
        if child is None:
            continue
        if tag == "skipped":
            outcome = "skipped"
            message = skip_reason(child.get("message", ""), child.text or "")
        else:
            outcome = "failed" if tag == "failure" else "error"
            message = _first_line(child.get("message")) or _first_line(child.text)
        break
    return Case(name=elem.get("name", ""), classname=elem.get("classname", ""),
                outcome=outcome, message=message,
                seconds=float(elem.get("time", 0) or 0), properties=props)


def _suites(path: Path) -> list[ET.Element]:
    """The <testsuite> elements of a JUnit XML file; ValueError if it is none."""
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError as exc:
        raise ValueError(f"{path} is not valid XML: {exc}") from None
    if root.tag not in ("testsuites", "testsuite"):
        raise ValueError(f"{path} is not JUnit XML (root <{root.tag}>)")
    return [root] if root.tag == "testsuite" else list(root.iter("testsuite"))


def parse_junit(path: Path) -> JUnitReport:
    """Cases, outcomes, skip reasons and properties from a JUnit XML file.
    Raises ValueError when the file is not JUnit XML."""
    suites = _suites(path)
    report = JUnitReport()
    for suite in suites:
        report.seconds += float(suite.get("time", 0) or 0)
        report.cases.extend(_case(tc) for tc in suite.iter("testcase"))
    return report


def merge_junit(paths: Sequence[Path]) -> bytes:
    """One <testsuites> document holding every file's suites (the shards of
    a part run in several processes). Raises ValueError as parse_junit."""
    root = ET.Element("testsuites")
    for path in paths:
        root.extend(_suites(path))
    return ET.tostring(root, encoding="utf-8", xml_declaration=True)
