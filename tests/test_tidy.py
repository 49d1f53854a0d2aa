"""The house rules as a ratchet: short functions, short modules, no citations of documents that
are not in the repository, no import circles, and no inheritance chains in the product.

Each rule is a small checker over a repository root that returns its offenders, so the same code
runs on the real tree and on a synthetic tree built in a temporary directory; the synthetic tests
prove that every checker can fail (a rule that cannot fail enforces nothing). A rule that the
real tree breaks fails the suite: fix the offender, do not mark the test.
"""

from __future__ import annotations

import ast
import builtins
import re
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

import grimp
import pytest

ROOT = Path(__file__).resolve().parent.parent

# The packages the rules cover. `clients/` is generated code and stays out; `common` is listed
# so that the rules cover it the day it exists.
PACKAGES = ("app", "bookie", "managed_ledger", "topics", "compactor", "common", "devtools", "bench", "tests")

# The packages that ship: the inheritance rule covers these (tests and bench may subclass freely).
PRODUCT = ("app", "bookie", "managed_ledger", "topics", "compactor", "common")

MAX_FUNCTION_LINES = 70
# A product class and the project classes above it form a chain of at most this many classes:
# a class may extend one project class, never one that extends another (composition instead).
MAX_CLASS_CHAIN = 2
# Bases that make a class exempt, wherever they sit in its ancestry: typing Protocols (a
# protocol extends protocols by design), Pydantic models and settings, and exceptions (their
# hierarchy is the errors' taxonomy, as STYLE asks).
_EXEMPT_BASES = {"Protocol", "BaseModel", "BaseSettings"}
MAX_MODULE_LINES = 600

# A markdown document named in text: a path of word characters, dots, slashes and dashes that
# ends in ".md". URLs are removed before matching, since they point outside the repository
# on purpose.
_MARKDOWN_REF = re.compile(r"[\w./-]*\w\.md\b")
_URL = re.compile(r"https?://\S+")


def present_packages(root: Path, packages: Sequence[str] = PACKAGES) -> list[str]:
    return [name for name in packages if (root / name / "__init__.py").is_file()]


def python_files(root: Path, packages: Sequence[str] = PACKAGES) -> Iterator[Path]:
    for name in present_packages(root, packages):
        yield from sorted((root / name).rglob("*.py"))


def long_functions(root: Path, packages: Sequence[str] = PACKAGES) -> list[str]:
    """Functions and methods longer than the limit, as `path:line name (n lines)`.

    A function's length runs from its `def` line to its last line; decorators are not counted,
    which is what `ast` gives (`lineno` is the `def` line, not the first decorator)."""
    offenders = []
    for path in python_files(root, packages):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                assert node.end_lineno is not None
                length = node.end_lineno - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    rel = path.relative_to(root)
                    offenders.append(f"{rel}:{node.lineno} {node.name} ({length} lines)")
    return offenders


def long_modules(root: Path, packages: Sequence[str] = PACKAGES) -> list[str]:
    """Modules longer than the limit, as `path (n lines)`."""
    offenders = []
    for path in python_files(root, packages):
        length = len(path.read_text(encoding="utf-8").splitlines())
        if length > MAX_MODULE_LINES:
            offenders.append(f"{path.relative_to(root)} ({length} lines)")
    return offenders


def missing_documents(root: Path, packages: Sequence[str] = PACKAGES) -> list[str]:
    """Markdown documents named in code, docstrings, `docs/` or the README that do not exist.

    A name is resolved relative to the repository root, then relative to `docs/` (where the
    documents link each other by bare file name), then relative to the citing file's folder."""
    texts = [*python_files(root, packages), *sorted((root / "docs").glob("*.md"))]
    if (root / "README.md").is_file():
        texts.append(root / "README.md")
    offenders = []
    for path in texts:
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            for ref in _MARKDOWN_REF.findall(_URL.sub("", line)):
                bases = (root, root / "docs", path.parent)
                if not any((base / ref).is_file() for base in bases):
                    offenders.append(f"{path.relative_to(root)}:{number} {ref}")
    return offenders


def import_cycles(root: Path, packages: Sequence[str] = PACKAGES) -> list[str]:
    """Import circles between modules, each as `a -> b -> ... -> a`.

    The graph counts every import statement: those under `if TYPE_CHECKING:` (a circle there
    is still a circle in the design, and one refactor away from an ImportError) and those inside
    functions (a deferred import hides a circle rather than removing it)."""
    names = present_packages(root, packages)
    if not names:
        return []
    sys.path.insert(0, str(root))
    try:
        graph = grimp.build_graph(*names, exclude_type_checking_imports=False, cache_dir=None)
    finally:
        sys.path.remove(str(root))
    edges = {module: graph.find_modules_directly_imported_by(module) for module in graph.modules}
    return [" -> ".join(cycle) for cycle in _cycles(edges)]


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The shortest circle through each module that lies on one, without repeats.

    Modules on a circle are found as the strongly connected components of more than one module
    (Tarjan's algorithm, iterative so that a deep graph cannot exhaust the recursion limit).
    Naming the shortest circle through every member, rather than one per component, names each
    pair that has to be untangled: ledger -> cursor -> ledger and ledger -> dedup -> ledger
    both show up, not just the first."""
    cycles: set[tuple[str, ...]] = set()
    for component in _components(edges):
        for module in component:
            cycle = _shortest_cycle(module, set(component), edges)
            turn = cycle.index(min(cycle[:-1]))
            cycles.add((*cycle[turn:-1], *cycle[:turn], cycle[turn]))
    return [list(cycle) for cycle in sorted(cycles)]


def _components(edges: dict[str, set[str]]) -> list[list[str]]:
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []
    for start in sorted(edges):
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        components.append(sorted(component))
            elif child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(sorted(edges.get(child, ())))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return components


def _shortest_cycle(start: str, members: set[str], edges: dict[str, set[str]]) -> list[str]:
    """The shortest circle from `start` back to itself inside its component, breadth first."""
    parents: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for child in sorted(edges[node] & members):
                if child == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(parents[path[-1]])
                    return [*reversed(path), start]
                if child not in parents:
                    parents[child] = node
                    following.append(child)
        frontier = following
    raise AssertionError(f"{start} is on no circle inside {sorted(members)}")


def _is_exception_name(name: str) -> bool:
    found = getattr(builtins, name, None)
    return isinstance(found, type) and issubclass(found, BaseException)


def _module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _class_bases(root: Path, packages: Sequence[str]) -> dict[str, list[str]]:
    """Every class of the packages, as `module.Class`, with its bases: a project class as its
    qualified name, anything else as its bare name (`Protocol`, `Exception`, `BaseModel`)."""
    found: dict[str, list[ast.expr]] = {}
    scopes: dict[str, dict[str, str]] = {}  # module -> local name -> qualified name
    for path in python_files(root, packages):
        module = _module_name(root, path)
        scope = scopes.setdefault(module, {})
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for alias in node.names:
                    scope[alias.asname or alias.name] = f"{node.module}.{alias.name}"
            elif isinstance(node, ast.ClassDef):
                scope[node.name] = f"{module}.{node.name}"
                found[f"{module}.{node.name}"] = node.bases
    out: dict[str, list[str]] = {}
    for qualified, bases in found.items():
        scope = scopes[qualified.rsplit(".", 1)[0]]
        names = []
        for base in bases:
            text = ast.unparse(base.value if isinstance(base, ast.Subscript) else base)
            bare = text.rsplit(".", 1)[-1]
            resolved = scope.get(text, text)
            names.append(resolved if resolved in found else bare)
        out[qualified] = names
    return out


def inheritance_chains(root: Path, packages: Sequence[str] = PRODUCT) -> list[str]:
    """Product classes whose chain of project classes (the class, its project base, that one's
    project base...) is longer than the limit, as `module.Class (a -> b -> c)`; Protocols,
    Pydantic models and exceptions aside."""
    bases = _class_bases(root, packages)

    def exempt(name: str, seen: frozenset[str] = frozenset()) -> bool:
        for base in bases.get(name, []):
            if base in bases and base not in seen:
                if exempt(base, seen | {name}):
                    return True
            elif base in _EXEMPT_BASES or _is_exception_name(base):
                return True
        return False

    def longest(name: str, seen: frozenset[str] = frozenset()) -> list[str]:
        above = [longest(b, seen | {name}) for b in bases[name] if b in bases and b not in seen]
        return [name, *max(above, key=len, default=[])]

    offenders = []
    for name in sorted(bases):
        chain = longest(name)
        if len(chain) > MAX_CLASS_CHAIN and not exempt(name):
            offenders.append(f"{name} ({' -> '.join(chain)})")
    return offenders


# The real tree.


def test_no_function_is_longer_than_70_lines() -> None:
    offenders = long_functions(ROOT)
    assert not offenders, "functions over 70 lines:\n" + "\n".join(offenders)


def test_no_module_is_longer_than_600_lines() -> None:
    offenders = long_modules(ROOT)
    assert not offenders, "modules over 600 lines:\n" + "\n".join(offenders)


def test_no_reference_to_a_document_outside_the_repository() -> None:
    offenders = missing_documents(ROOT)
    assert not offenders, "references to documents not in the repository:\n" + "\n".join(offenders)


def test_no_import_circle() -> None:
    offenders = import_cycles(ROOT)
    assert not offenders, "import circles:\n" + "\n".join(offenders)


def test_no_product_class_is_a_chain_of_more_than_two_project_classes() -> None:
    offenders = inheritance_chains(ROOT)
    assert not offenders, "inheritance chains (compose instead):\n" + "\n".join(offenders)


# Each checker, proved able to fail on a synthetic tree.


def _function(name: str, lines: int) -> str:
    """A decorated function of exactly `lines` lines, counted from its `def`."""
    body = "".join(f"    x{i} = {i}\n" for i in range(lines - 2))
    return f"@staticmethod\ndef {name}() -> None:\n{body}    return None\n"


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "__init__.py").write_text("")
    return tmp_path


def test_checker_reports_a_71_line_function_and_not_a_70_line_one(tree: Path) -> None:
    (tree / "app" / "funcs.py").write_text(_function("too_long", 71) + "\n\n" + _function("fits", 70))
    assert long_functions(tree) == ["app/funcs.py:2 too_long (71 lines)"]


def test_checker_reports_a_601_line_module_and_not_a_600_line_one(tree: Path) -> None:
    (tree / "app" / "fits.py").write_text("x = 1\n" * 600)
    (tree / "app" / "too_long.py").write_text("x = 1\n" * 601)
    assert long_modules(tree) == ["app/too_long.py (601 lines)"]


def test_checker_reports_a_reference_to_a_missing_document(tree: Path) -> None:
    # The names are built at run time so that this file does not cite them itself.
    missing, present, other = "NOWHERE" + ".md", "present" + ".md", "other" + ".md"
    (tree / "docs").mkdir()
    (tree / "docs" / present).write_text("# here\n")
    (tree / "app" / "cites.py").write_text(f'"""See {missing} and docs/{present}."""\n')
    (tree / "docs" / other).write_text(f"Linked: [p]({present}), [r](../app/{missing}).\n")
    assert missing_documents(tree) == [f"app/cites.py:1 {missing}", f"docs/{other}:1 ../app/{missing}"]


def test_checker_reports_a_two_module_circle(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A package name of its own, so that grimp cannot find the real `app` first.
    package = tree / "tidy_circle_fixture"
    package.mkdir()
    (package / "__init__.py").write_text("")
    # Both halves of the circle hide: one under TYPE_CHECKING, one inside a function; the
    # checker must see both, or it would miss exactly the circles that are easiest to write.
    type_checking = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from . import b\n"
    (package / "a.py").write_text(type_checking)
    (package / "b.py").write_text("def f() -> None:\n    from tidy_circle_fixture import a\n")
    (package / "c.py").write_text("from tidy_circle_fixture import a\n")
    monkeypatch.delitem(sys.modules, "tidy_circle_fixture", raising=False)
    assert import_cycles(tree, ["tidy_circle_fixture"]) == [
        "tidy_circle_fixture.a -> tidy_circle_fixture.b -> tidy_circle_fixture.a"
    ]


def test_checker_reports_a_three_deep_chain_and_not_the_exempt_ones(tree: Path) -> None:
    (tree / "app" / "base.py").write_text("class Base:\n    pass\n")
    (tree / "app" / "chain.py").write_text(
        "from typing import Protocol\n"
        "from app.base import Base\n"
        "import app.base\n\n"
        "class Middle(Base):\n    pass\n\n"  # two deep: allowed
        "class Top(Middle):\n    pass\n\n"  # three deep: the offender
        "class Other(app.base.Base):\n    pass\n\n"
        "class Api(Protocol):\n    pass\n\n"
        "class MoreApi(Api, Protocol):\n    pass\n\n"
        "class AllApi(MoreApi, Protocol):\n    pass\n\n"  # protocols extend protocols
        "class Failure(Exception):\n    pass\n\n"
        "class Refused(Failure):\n    pass\n\n"
        "class Busy(Refused):\n    pass\n"  # an exception taxonomy
    )
    assert inheritance_chains(tree) == ["app.chain.Top (app.chain.Top -> app.chain.Middle -> app.base.Base)"]
