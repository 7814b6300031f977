"""The floor plan (docs/architecture.md): the package's layers import downward only, and no module is shadowed
by a name of its package (tests/test_front_doors.py: the front's imports)."""

import ast
import pkgutil
import sys
from pathlib import Path

from tests.support.imports import PACKAGE, imports, module_name, package_files

#: bottom to top; each top-level module or folder of the package imports only from its own layer and those before it.
#: The package's face (__init__.py) re-exports the session layer: importing from it is importing from "session".
LAYERS = ["lang", "ir", "generate", "runtime", "verification", "compilers", "theory", "session", "front", "tools"]
FACE = "__init__"


def layer_of(part: str) -> int:
    if part == FACE:
        return LAYERS.index("session")
    if part not in LAYERS:
        raise AssertionError(f"{part!r} is in no layer: add it to LAYERS (and to docs/architecture.md)")
    return LAYERS.index(part)


def test_imports_go_downward():
    bad = []
    for path in package_files():
        name = module_name(path)
        if not name:
            continue  # the package's face imports from every layer
        own = layer_of(name[0])
        for line, target, _ in imports(path):
            part = target[0] if target else FACE
            if part != name[0] and layer_of(part) > own:
                bad.append(f"{path.relative_to(PACKAGE)}:{line} imports {'.'.join(target) or 'the face'} "
                           f"(layer {layer_of(part)} > {own})")
    assert not bad, "\n".join(bad)


def test_every_top_level_module_is_in_a_layer():
    tops = {p.stem for p in PACKAGE.glob("*.py") if p.stem != FACE} | {
        p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists()}
    assert tops == set(LAYERS)


def _bound_names(init: Path) -> dict[str, int]:
    """Names a package's __init__ binds other than by importing its own submodule of that name: line of each."""
    tree = ast.parse(init.read_text())
    bound = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound[node.name] = node.lineno
        elif isinstance(node, ast.Assign):
            for t in node.targets:
                for n in ast.walk(t):
                    if isinstance(n, ast.Name):
                        bound[n.id] = node.lineno
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)) and isinstance(node.target, ast.Name):
            bound[node.target.id] = node.lineno
        elif isinstance(node, ast.ImportFrom):
            for alias in node.names:
                own_submodule = node.level == 1 and node.module is None and alias.asname in (None, alias.name)
                if not own_submodule:
                    bound[alias.asname or alias.name] = node.lineno
        elif isinstance(node, ast.Import):
            for alias in node.names:
                bound[alias.asname or alias.name.split(".")[0]] = node.lineno
    return bound


def test_no_name_of_a_package_shadows_its_submodule():
    """`jupyter_gpuiter.X` is the module X wherever a submodule X exists: a function or a re-exported name of the
    same name would make the module reachable only through importlib, and would be replaced by the module
    as soon as anything imports it."""
    bad = []
    packages = [PACKAGE] + sorted(p.parent for p in PACKAGE.rglob("__init__.py") if "labextension" not in p.parts
                                  and p.parent != PACKAGE)
    for folder in packages:
        submodules = {m.name for m in pkgutil.iter_modules([str(folder)])}
        for name, line in _bound_names(folder / "__init__.py").items():
            if name in submodules:
                bad.append(f"{(folder / '__init__.py').relative_to(PACKAGE.parent)}:{line} binds {name!r}, "
                           f"the name of its submodule")
    assert not bad, "\n".join(bad)


def test_every_package_attribute_named_like_a_submodule_is_that_module():
    bad = []
    for info in pkgutil.walk_packages([str(PACKAGE)], "jupyter_gpuiter."):
        __import__(info.name)
    for name, module in list(sys.modules.items()):
        if not name.startswith("jupyter_gpuiter") or not hasattr(module, "__path__"):
            continue
        for sub in pkgutil.iter_modules(module.__path__):
            value = getattr(module, sub.name, None)
            if value is not None and value is not sys.modules.get(f"{name}.{sub.name}"):
                bad.append(f"{name}.{sub.name} is {type(value).__name__}, not the module")
    assert not bad, "\n".join(bad)
