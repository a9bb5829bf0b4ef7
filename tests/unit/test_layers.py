import re
import subprocess
import sys
from pathlib import Path

import pytest


def test_import_contracts_hold():
    root = Path(__file__).resolve().parents[2]
    lint = Path(sys.executable).with_name("lint-imports")
    result = subprocess.run([str(lint)], cwd=root, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "7 kept, 0 broken" in result.stdout


def test_code_passes_the_projects_lint_rules():
    """The rule set in pyproject.toml ([tool.ruff]): pyflakes, pycodestyle, isort, bugbear, pyupgrade."""
    root = Path(__file__).resolve().parents[2]
    ruff = Path(sys.executable).with_name("ruff")
    result = subprocess.run([str(ruff), "check", "--no-cache", "chaos", "probes", "testbed", "tests", "bench"],
                            cwd=root, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_typed_modules_pass_mypy_strict():
    """The modules [tool.mypy] in pyproject.toml names (the faults, the plan, the lifecycle, the
    revert, the landed check, the probes, the image builder), type-checked strictly; its cache kept
    between runs."""
    root = Path(__file__).resolve().parents[2]
    mypy = Path(sys.executable).with_name("mypy")
    cache = Path.home() / ".cache" / "kilocard" / "mypy"
    result = subprocess.run([str(mypy), "--cache-dir", str(cache)], cwd=root, capture_output=True, text=True,
                            check=False)
    assert result.returncode == 0, result.stdout + result.stderr


LOADED = """
import runpy, sys
sys.argv = ["kilocard", *sys.argv[1:]]
try:
    runpy.run_module("chaos.cli", run_name="__main__")
except SystemExit as exc:
    code = exc.code
import chaos.actions, probes.chaostoolkit  # the Chaos Toolkit modules, too
print(code, sorted(m for m in sys.modules if m == "testbed" or m.startswith("testbed.")))
"""


@pytest.mark.parametrize("argv", [
    ["fault", "--spec", '{"kind": "node-isolate", "nodes": ["n"], "ttl_seconds": 5}', "--kubeconfig", "/nonexistent"],
    ["fault", "--spec", '{"kind": "meteor"}'],
    ["plan", "--spec", '{"kind": "node-isolate", "nodes": ["n"], "ttl_seconds": 5}', "--kubeconfig", "/nonexistent"],
    ["recover", "--all", "--kubeconfig", "/nonexistent"],
])
def test_kilocard_commands_and_chaostoolkit_modules_never_load_the_testbed(argv, tmp_path):
    result = subprocess.run([sys.executable, "-c", LOADED, *argv], capture_output=True, text=True, check=False,
                            env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    assert result.stdout.strip() == "2 []", result.stdout + result.stderr
    assert "Traceback" not in result.stderr and result.stderr.startswith("kilocard: ")


def test_every_file_the_architecture_names_exists():
    """docs/architecture.md's layers and "where a change goes" name files and modules; a rename
    that leaves the map behind fails here (`<kind>` and globs stand for many)."""
    root = Path(__file__).resolve().parents[2]
    text = (root / "docs" / "architecture.md").read_text()
    named = set(re.findall(r"`((?:chaos|probes|testbed|tests|bench|docs|experiments)/[\w./-]+)`", text))
    modules = set(re.findall(r"`((?:chaos|probes|testbed)(?:\.\w+)+)`", text))
    missing = [p for p in sorted(named) if not (root / p).exists()]
    missing += [m for m in sorted(modules) if not _module_exists(root, m)]
    assert len(named) > 10 and len(modules) > 20
    assert not missing, missing


def _module_exists(root: Path, dotted: str) -> bool:
    """A module, a package, or a name inside one (`chaos.kube.Kube`, `chaos.guards.SCHEMA`)."""
    parts = dotted.split(".")
    for n in range(len(parts), 1, -1):  # at least a module of the package
        base = root.joinpath(*parts[:n])
        if base.with_suffix(".py").exists() or (base / "__init__.py").exists():
            return True
    return False
