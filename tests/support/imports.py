"""The package's imports, read from its source: what tests/test_layers.py and tests/test_front_doors.py check."""

import ast
from pathlib import Path

import jupyter_gpuiter

PACKAGE = Path(jupyter_gpuiter.__file__).parent


def module_name(path: Path) -> list[str]:
    """The module's dotted name under the package, as parts ([] for the package's face)."""
    parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
    return parts[:-1] if parts[-1] == "__init__" else parts


def imports(path: Path):
    """(line, dotted target under the package as parts, name) of each import of the package in `path`: the
    module, or for a name imported from a package, the submodule of that name if there is one (name None),
    else the package and the name."""
    tree = ast.parse(path.read_text())
    parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
    package = parts[:-1]  # the package the module is in (a package's __init__ is in itself)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            module = (node.module or "").split(".") if node.module else []
            if node.level:
                target = package[: len(package) - (node.level - 1)] + module
            elif module[:1] == ["jupyter_gpuiter"]:
                target = module[1:]
            else:
                continue
            for alias in node.names:
                sub = PACKAGE.joinpath(*target, alias.name)
                if sub.with_suffix(".py").exists() or sub.is_dir():
                    yield node.lineno, target + [alias.name], None
                else:
                    yield node.lineno, target, alias.name
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "jupyter_gpuiter":
                    yield node.lineno, alias.name.split(".")[1:], None


def package_files():
    return sorted(p for p in PACKAGE.rglob("*.py") if "labextension" not in p.parts)
