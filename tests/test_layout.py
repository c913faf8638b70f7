"""The package's shape: imports run one way along the data flow, and no module grows past ~300 lines."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "sweep"
# the data flow, bottom to top: a module may import its own layer and the layers before it, never later ones
LAYERS = [
    {"errors", "textfile", "plugins", "packaged", "models", "cache", "locks", "logs", "llm"},
    {"config"},
    {"data"},
    {"chunking"},
    {"labels"},
    {"retrieval"},
    {"metrics"},
    {"pipeline"},
    {"analysis"},
    {"outputs"},
    {"tuning"},
    {"serving"},
    {"integrations", "labeling"},
    {"cli", "cli_label", "cli_gate", "__init__", "__main__"},
]
MAX_LINES = 330  # ~300: a module a newcomer reads in one sitting


def layer_of(module: str) -> int:
    top = module.split(".")[1] if module.count(".") else "__init__"
    return next(i for i, names in enumerate(LAYERS) if top in names)


def modules() -> dict[str, Path]:
    out = {}
    for path in SRC.rglob("*.py"):
        parts = path.relative_to(SRC.parent).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" and len(parts) > 2 else parts)] = path
    return out


def imports(path: Path, annotations: bool = False) -> set[str]:
    """The sweep modules ``path`` imports, lazy ones included; ``annotations``: those under
    ``if TYPE_CHECKING:`` too (not run, but a reader follows them all the same)."""
    found = set()
    tree = ast.parse(path.read_text())
    for block in [
        n for n in ast.walk(tree) if isinstance(n, ast.If) and ast.unparse(n.test) == "TYPE_CHECKING"
    ]:
        if not annotations:
            block.body = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("sweep"):
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("sweep")}
    return found


def test_every_module_belongs_to_a_layer_and_imports_only_earlier_layers():
    wrong = []
    for name, path in modules().items():
        own = layer_of(name)
        wrong += [
            f"{name} -> {target}" for target in imports(path) if target != "sweep" and layer_of(target) > own
        ]
    assert not wrong, "imports against the data flow:\n" + "\n".join(sorted(wrong))


def test_no_import_cycle_between_modules_not_even_for_annotations():
    graph = {
        name: {t for t in imports(path, annotations=True) if t in modules()}
        for name, path in modules().items()
    }
    seen, stack = set(), []

    def visit(node: str) -> None:
        if node in stack:
            raise AssertionError("import cycle: " + " -> ".join(stack[stack.index(node) :] + [node]))
        if node in seen:
            return
        stack.append(node)
        for nxt in graph[node]:
            visit(nxt)
        stack.pop()
        seen.add(node)

    for name in graph:
        visit(name)


def test_no_module_of_the_package_or_the_scripts_is_over_three_hundred_lines():
    paths = [*modules().values(), *(SRC.parents[1] / "scripts").rglob("*.py")]
    long = {
        str(p.relative_to(SRC.parents[1])): n
        for p in paths
        if (n := len(p.read_text().splitlines())) > MAX_LINES
    }
    assert not long, f"split these modules: {long}"


def test_every_public_name_resolves_and_has_a_docstring_with_an_example():
    import sweep

    missing = [n for n in sweep.__all__ if getattr(sweep, n) is None]
    assert not missing
    for name in (
        "load_config",
        "load_sweep_config",
        "evaluate_config",
        "run_sweep",
        "score",
        "compare_scores",
    ):
        doc = getattr(sweep, name).__doc__ or ""
        assert "Args:" in doc and "Returns:" in doc and "Example:" in doc, name
