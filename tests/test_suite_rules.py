"""Rules of the suite itself, checked on its source (an AST scan of every file under tests/).

- No test imports the benchmarks: bench/ may use the suite's helpers, never the reverse.
- No test asserts on a wall-clock measurement: a duration depends on how busy the machine is,
  so a bound on it flakes. Count operations instead, compare growth (tests/scaling.py: a
  ratio of two measurements in the same test), or measure in bench/. A deadline of a bounded
  wait (``assert time.monotonic() < deadline``) is not a measurement and is allowed.

A measurement, as the scan sees it: a clock reading subtracted from another (``time.monotonic()
- started``, where ``started`` was read from a clock), a name bound to one, or a call of a
  function (anywhere under tests/) that returns one.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
CLOCKS = frozenset(
    {
        "monotonic",
        "monotonic_ns",
        "perf_counter",
        "perf_counter_ns",
        "process_time",
        "thread_time",
        "time",
        "time_ns",
    }
)


def suite_files() -> list[Path]:
    return sorted(p for p in TESTS.rglob("*.py") if "node_modules" not in p.parts)


def is_clock_call(node: ast.AST) -> bool:
    """``time.monotonic()`` and friends, or a bare ``perf_counter()`` imported from time."""
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    if isinstance(func, ast.Attribute):
        return func.attr in CLOCKS and isinstance(func.value, ast.Name) and func.value.id == "time"
    return isinstance(func, ast.Name) and func.id in CLOCKS - {"time"}


def bindings(tree: ast.AST) -> Iterator[tuple[str, ast.AST]]:
    """(name, value) of every simple binding: ``x = v``, ``x: T = v``, ``a, b = v, w``, walrus."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            pairs = [(target, node.value) for target in node.targets]
        elif isinstance(node, ast.AnnAssign | ast.AugAssign | ast.NamedExpr) and node.value:
            pairs = [(node.target, node.value)]
        else:
            continue
        while pairs:
            target, value = pairs.pop()
            if isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple):
                pairs += zip(target.elts, value.elts, strict=False)
            elif isinstance(target, ast.Name):
                yield target.id, value


def plain_functions(tree: ast.AST) -> Iterator[ast.FunctionDef | ast.AsyncFunctionDef]:
    """Functions that are not methods (a method's name, like ``run``, is too common to follow)."""
    bodies = [getattr(tree, "body", [])]
    while bodies:
        for node in bodies.pop():
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                yield node
                bodies.append(node.body)


@dataclass
class Measurements:
    """What counts as a wall-clock measurement in one file."""

    functions: set[str]  # functions (of any file) that return a measurement, shared
    readings: set[str] = field(default_factory=set)  # names bound to a clock reading
    durations: set[str] = field(default_factory=set)  # names bound to a measurement

    def is_difference(self, node: ast.AST) -> bool:
        if not (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Sub)):
            return False
        return any(
            is_clock_call(side) or (isinstance(side, ast.Name) and side.id in self.readings)
            for side in (node.left, node.right)
        )

    def measures(self, expression: ast.AST) -> bool:
        return any(
            self.is_difference(node)
            or (isinstance(node, ast.Name) and node.id in self.durations)
            or (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in self.functions
            )
            for node in ast.walk(expression)
        )


def measurements(trees: dict[str, ast.AST]) -> dict[str, Measurements]:
    """Each file's measurements, followed through names and functions until nothing is new."""
    functions: set[str] = set()
    found = {
        name: Measurements(functions, {n for n, value in bindings(tree) if is_clock_call(value)})
        for name, tree in trees.items()
    }
    while True:
        before = len(functions) + sum(len(m.durations) for m in found.values())
        for name, tree in trees.items():
            m = found[name]
            m.durations |= {n for n, value in bindings(tree) if m.measures(value)}
            for function in plain_functions(tree):
                returns = [r.value for r in ast.walk(function) if isinstance(r, ast.Return)]
                if any(value is not None and m.measures(value) for value in returns):
                    functions.add(function.name)
        if len(functions) + sum(len(m.durations) for m in found.values()) == before:
            return found


def bench_imports(tree: ast.AST) -> list[int]:
    """Lines that import bench or a module of it."""
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            modules = [node.module]
        else:
            continue
        if any(m == "bench" or m.startswith("bench.") for m in modules):
            lines.append(node.lineno)
    return lines


def timing_asserts(trees: dict[str, ast.AST]) -> list[str]:
    """``file:line`` of every assert on a wall-clock measurement."""
    found = measurements(trees)
    return [
        f"{name}:{node.lineno}"
        for name, tree in trees.items()
        for node in ast.walk(tree)
        if isinstance(node, ast.Assert) and found[name].measures(node.test)
    ]


def parsed(files: list[Path]) -> dict[str, ast.AST]:
    return {str(p.relative_to(TESTS.parent)): ast.parse(p.read_text(), str(p)) for p in files}


def test_no_test_imports_the_benchmarks() -> None:
    trees = parsed(suite_files())
    found = [f"{name}:{line}" for name, tree in trees.items() for line in bench_imports(tree)]
    assert found == [], "tests must not import bench/ (bench may import tests' helpers)"


def test_no_test_asserts_on_wall_clock_time() -> None:
    found = timing_asserts(parsed(suite_files()))
    assert found == [], (
        "asserts on a measured duration flake on a busy machine: count operations, compare "
        "growth (tests/scaling.py) or move the measurement to bench/"
    )


# --- the scan itself ----------------------------------------------------------------------------

MEASURED = {
    "inline": "started = time.perf_counter()\nwork()\nassert time.perf_counter() - started < 2",
    "named": "t0 = time.monotonic()\nwork()\ntook = time.monotonic() - t0\nassert took < 10",
    "returned": (
        "async def healthz():\n    s = time.perf_counter()\n    await get()\n"
        "    return time.perf_counter() - s\n"
        "async def test():\n    assert await healthz() < 1.0"
    ),
    "returned, then named": (
        "def took():\n    s = perf_counter()\n    return perf_counter() - s\n"
        "def test():\n    seconds = took()\n    assert 0.9 < seconds"
    ),
}
NOT_MEASURED = {
    "a bounded wait": "deadline = time.monotonic() + 5\nassert time.monotonic() < deadline",
    "a growth ratio": "assert growth(redact, small, large) < 64",
    "a parameter named elapsed": "def test(elapsed):\n    assert decay(elapsed) == 1",
    "a duration only printed": (
        "started = time.perf_counter()\nwork()\nprint(time.perf_counter() - started)\nassert ok"
    ),
}


@pytest.mark.parametrize("source", MEASURED.values(), ids=MEASURED)
def test_the_scan_finds_a_measured_duration(source: str) -> None:
    assert timing_asserts({"t.py": ast.parse(source)}) != []


@pytest.mark.parametrize("source", NOT_MEASURED.values(), ids=NOT_MEASURED)
def test_the_scan_lets_other_asserts_be(source: str) -> None:
    assert timing_asserts({"t.py": ast.parse(source)}) == []


@pytest.mark.parametrize(
    "source",
    ["import bench", "import bench.load", "from bench.load import Load", "from bench import x"],
)
def test_the_scan_finds_an_import_of_bench(source: str) -> None:
    assert bench_imports(ast.parse(source)) == [1]


def test_the_scan_lets_other_imports_be() -> None:
    assert bench_imports(ast.parse("import benchmark\nfrom tests.bench_like import x")) == []
