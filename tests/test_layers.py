"""The floor plan (docs/architecture.md): the package's layers import downward only, no module is shadowed by
a name of its package, and the front reaches the rest through the Session, the public face and theory."""

import ast
import pkgutil
import sys
from pathlib import Path

import pytest

import jupyter_gpuiter

PACKAGE = Path(jupyter_gpuiter.__file__).parent
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


#: the front's only doors: the Session's module, the package's face (the names its __init__ re-exports) and theory
FRONT_DOORS = (["session"], [], ["theory"])


def front_violations() -> list[str]:
    """Each import of the front's that passes the doors: "file:line imports module" or "... imports name from
    module"."""
    bad = {}
    for path in package_files():
        name = module_name(path)
        if not name or name[0] != "front":
            continue
        for line, target, imported in imports(path):
            if target[:1] == ["front"] or any(target == door for door in FRONT_DOORS):
                continue
            names = bad.setdefault((str(path.relative_to(PACKAGE)), line, ".".join(target)), [])
            names += [imported] if imported else []
    return [f"{file}:{line} imports {', '.join(names) + ' from ' if names else ''}jupyter_gpuiter.{module}"
            for (file, line, module), names in sorted(bad.items())]


@pytest.mark.xfail(strict=True, reason="the Session-as-only-door step (issue 25 item 1) is next")
def test_the_front_reaches_only_the_session_the_face_and_theory():
    bad = front_violations()
    assert not bad, "\n".join(bad)
