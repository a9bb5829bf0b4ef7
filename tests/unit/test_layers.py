import subprocess
import sys
from pathlib import Path


def test_toolkit_never_imports_the_testbed():
    root = Path(__file__).resolve().parents[2]
    lint = Path(sys.executable).with_name("lint-imports")
    result = subprocess.run([str(lint)], cwd=root, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 kept, 0 broken" in result.stdout


def test_code_passes_the_projects_lint_rules():
    """The rule set in pyproject.toml ([tool.ruff]): pyflakes, pycodestyle, isort, bugbear, pyupgrade."""
    root = Path(__file__).resolve().parents[2]
    ruff = Path(sys.executable).with_name("ruff")
    result = subprocess.run([str(ruff), "check", "--no-cache", "chaos", "probes", "testbed", "tests", "bench"],
                            cwd=root, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
