"""The package's layers import downward only (DESIGN.md §3): no module imports from a layer above it."""

import ast
from pathlib import Path

import jupyter_gpuiter

PACKAGE = Path(jupyter_gpuiter.__file__).parent
LAYERS = ["lang", "ir", "runtime", "verify", "compilers", "theory", "resident",
          {"magic", "comm", "kernel", "widgets"}, {"cli", "bench"}]


def layer_of(part: str) -> int:
    for i, layer in enumerate(LAYERS):
        if part == layer or (isinstance(layer, set) and part in layer):
            return i
    raise AssertionError(f"{part!r} is in no layer: add it to LAYERS (and to the design's order)")


def imported_parts(path: Path):
    tree = ast.parse(path.read_text())
    rel = path.relative_to(PACKAGE).with_suffix("").parts
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = list(rel[: len(rel) - node.level])
            target = base + (node.module.split(".") if node.module else [])
            for alias in node.names if not target else node.names[:1]:
                name = target[0] if target else alias.name
                if not target and not (PACKAGE / name).exists() and not (PACKAGE / f"{name}.py").exists():
                    name = "lang" if name == "__version__" else "cli"  # the package root re-exports the top
                yield node.lineno, name
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("jupyter_gpuiter."):
            yield node.lineno, node.module.split(".")[1]


def test_imports_go_downward():
    bad = []
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE).with_suffix("").parts
        if parts[0] == "__init__":
            continue  # the package's face imports from every layer
        own = layer_of(parts[0])
        for line, part in imported_parts(path):
            if part != parts[0] and layer_of(part) > own:
                bad.append(f"{path.relative_to(PACKAGE)}:{line} imports {part} (layer {layer_of(part)} > {own})")
    assert not bad, "\n".join(bad)
