"""What ``recipes check`` found: a summary and every problem, as text or as JSON.

    report = Report("vision", "data/train")
    report.summary["images"] = 1281167
    report.add("data/train/n01/x.JPEG", "cannot decode image (truncated)")
    print(report.render())          # or json.dumps(report.to_json())

The text lists ``MAX_PER_KIND`` problems of each kind, then how many more there are (one bad
export can repeat one problem for every image); the JSON lists every one.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Any

from recipes.core.contracts.errors import DataError, SkippedSampleWarning

MAX_PER_KIND = 20  # problems of one kind printed; a broken export repeats one problem thousands of times
KIND_PARTICULARS = re.compile(  # quoted names, [lists], paths, hex bytes, numbers, nan / inf
    r"'[^']*'|\"[^\"]*\"|\[[^\]]*\]|\S*/\S*|0x[0-9a-fA-F]+|[-+]?\d[\d.,e+-]*|\bnan\b|\binf\b")


@dataclass
class Problem:
    """One thing wrong: the file, where in it (``line 3``, ``annotation 2``; may be empty), why."""

    path: str
    reason: str
    where: str = ""

    def __str__(self) -> str:
        return f"{self.path}{' ' + self.where if self.where else ''}: {self.reason}"


@dataclass
class Report:
    """A check's result. ``summary`` holds JSON-ready values shown in insertion order;
    ``files`` the per-image details (JSON only); ``problems`` everything wrong."""

    domain: str
    path: str
    summary: dict[str, Any] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)
    files: list[dict[str, Any]] = field(default_factory=list)

    def add(self, path: Any, reason: str, where: str = "") -> None:
        self.problems.append(Problem(str(path), reason, where))

    def add_error(self, error: DataError | str, path: Any) -> None:
        """Add a problem from a DataError message of the form ``"<path>[ <where>]: <reason>"``."""
        self.problems.append(parse_message(str(error), str(path)))

    @property
    def clean(self) -> bool:
        return not self.problems

    def to_json(self) -> dict[str, Any]:
        return {
            "domain": self.domain, "path": self.path, "clean": self.clean, "summary": self.summary,
            "problems": [asdict(problem) for problem in self.problems], "files": self.files,
        }

    def render(self) -> str:
        lines = [f"check {self.domain} {self.path}"]
        width = max((len(key) for key in self.summary), default=0)
        for key, value in self.summary.items():
            lines.extend(_render_value(key.ljust(width), value))
        if self.problems:
            lines.append(f"\n{len(self.problems):,} problem(s):")
            lines.extend(capped(self.problems))
        else:
            lines.append("\nno problems found")
        return "\n".join(lines)


def problem_kind(problem: Problem) -> str:
    """The reason with its particulars (quoted names, numbers, lists, paths) blanked out:
    "bbox [1, 2, 0, 4] has a non-positive width" and "bbox [5, 5, 0, 1] ..." are one kind."""
    return KIND_PARTICULARS.sub("#", problem.reason)


def capped(problems: list[Problem], most: int = MAX_PER_KIND) -> list[str]:
    """The problems grouped by kind (first seen first), ``most`` of each, then how many more."""
    kinds: dict[str, list[Problem]] = {}
    for problem in problems:
        kinds.setdefault(problem_kind(problem), []).append(problem)
    lines = []
    for members in kinds.values():
        lines.extend(f"  {problem}" for problem in members[:most])
        if len(members) > most:
            lines.append(f"  ... and {len(members) - most:,} more of this kind (--json lists every one)")
    return lines


def parse_message(message: str, path: str) -> Problem:
    """Split ``"<path> line 3: reason"`` (the messages DataError carries) into a Problem."""
    message = message.removeprefix("skipped: ")
    if message.startswith(path):
        rest = message[len(path) :]
        where, sep, reason = rest.partition(": ")
        if sep:
            return Problem(path, reason, where.strip(" ,"))
    return Problem(path, message)


@contextmanager
def collect_skipped(report: Report, path: Any) -> Iterator[None]:
    """Run a reader with ``on_error="skip"``: each skip warning becomes a problem of ``report``."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", SkippedSampleWarning)
        yield
    for warning in caught:
        if issubclass(warning.category, SkippedSampleWarning):
            report.problems.append(parse_message(str(warning.message), str(path)))
        else:
            warnings.warn_explicit(warning.message, warning.category, warning.filename, warning.lineno)


def counts(values: Any, key: Callable[[Any], Any] = str) -> dict[str, int]:
    """``{value: how many}``, most frequent first."""
    tally: dict[str, int] = {}
    for value in values:
        name = key(value)
        tally[name] = tally.get(name, 0) + 1
    return dict(sorted(tally.items(), key=lambda item: -item[1]))


def spread(values: Sequence[int]) -> str:
    """``"2-5"`` for values from 2 to 5, ``"3"`` when they are all 3 (``"0"`` for none)."""
    return f"{min(values)}-{max(values)}" if values and min(values) != max(values) else str(values[0] if values else 0)


def _render_value(key: str, value: Any) -> list[str]:
    if isinstance(value, dict) and "histogram" in value:
        head = ", ".join(f"{name} {value[name]}" for name in ("count", "min", "p50", "p90", "p99", "max"))
        lines = [f"  {key}  {value['unit']}: {head}"]
        top = max((count for _, _, count in value["histogram"]), default=0) or 1
        for low, high, count in value["histogram"]:
            span = f"{low}" if high == low + 1 else f"{low}-{high - 1}"
            lines.append(f"  {'':{len(key)}}    {span:>11} {'#' * max(1 if count else 0, round(40 * count / top)):<40} {count}")
        return lines
    if isinstance(value, list) and value and isinstance(value[0], dict):
        columns = list(value[0])
        widths = [max(len(c), *(len(str(row[c])) for row in value)) for c in columns]
        lines = [f"  {key}  " + "  ".join(c.rjust(w) for c, w in zip(columns, widths))]
        lines += [f"  {'':{len(key)}}  " + "  ".join(str(row[c]).rjust(w) for c, w in zip(columns, widths)) for row in value]
        return lines
    if isinstance(value, dict):
        shown = list(value.items())
        text = ", ".join(f"{name} {count}" for name, count in shown[:12])
        if len(shown) > 12:
            text += f", ... ({len(shown) - 12} more)"
        return [f"  {key}  {text}"]
    return [f"  {key}  {value}"]
