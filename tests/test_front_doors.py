"""The front (jupyter_gpuiter/front/) reaches the rest of the package through three doors only: the Session's
module, the package's public face (the names jupyter_gpuiter/__init__.py re-exports) and theory
(docs/architecture.md)."""

import jupyter_gpuiter
from tests.support.imports import PACKAGE, imports, module_name, package_files

#: the front's doors: the Session's module and theory, and the names of the package's face
FRONT_DOORS = (["session"], ["theory"])
FACE = {*jupyter_gpuiter.__all__, "__version__"}


def front_violations() -> list[str]:
    """Each import of the front's that passes the doors: "file:line imports module" or "... imports name from
    module"."""
    bad = {}
    for path in package_files():
        name = module_name(path)
        if not name or name[0] != "front":
            continue
        for line, target, imported in imports(path):
            if target[:1] == ["front"] or target in FRONT_DOORS or (target == [] and imported in (None, *FACE)):
                continue
            names = bad.setdefault((str(path.relative_to(PACKAGE)), line, ".".join(target)), [])
            names += [imported] if imported else []
    return [f"{file}:{line} imports {', '.join(names) + ' from ' if names else ''}jupyter_gpuiter.{module}"
            for (file, line, module), names in sorted(bad.items())]


def test_the_front_reaches_only_the_session_the_face_and_theory():
    bad = front_violations()
    assert not bad, "\n".join(bad)
