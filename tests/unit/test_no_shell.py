"""R5: no subprocess call takes a shell string. Every call in the code (chaos, probes, testbed,
bench) to subprocess's run/Popen/call/check_call/check_output passes an argument list (a list
display, or a name bound to one), never shell=True; os.system and os.popen are not used at all.
Checked on the syntax tree, so a call written any way is found."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
SOURCES = sorted(p for d in ("chaos", "probes", "testbed", "bench") for p in (ROOT / d).rglob("*.py"))
SPAWN = {"run", "Popen", "call", "check_call", "check_output", "getoutput", "getstatusoutput"}


def calls(tree: ast.AST) -> list[tuple[ast.Call, str]]:
    """(call, "module.function") for subprocess.* and os.system/os.popen calls."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name):
            name = f"{node.func.value.id}.{node.func.attr}"
            if (node.func.value.id == "subprocess" and node.func.attr in SPAWN) or name in ("os.system", "os.popen"):
                found.append((node, name))
    return found


def test_the_scan_sees_the_code_that_spawns_processes() -> None:
    spawning = {p.relative_to(ROOT).as_posix() for p in SOURCES if calls(ast.parse(p.read_text()))}
    assert {"chaos/agent/backends.py", "testbed/processes.py", "testbed/build.py"} <= spawning


@pytest.mark.parametrize("path", SOURCES, ids=[p.relative_to(ROOT).as_posix() for p in SOURCES])
def test_no_subprocess_takes_a_shell_string(path: Path) -> None:
    tree = ast.parse(path.read_text())
    for call, name in calls(tree):
        where = f"{path.relative_to(ROOT)}:{call.lineno}"
        assert name not in ("os.system", "os.popen") and not name.endswith(("getoutput", "getstatusoutput")), \
            f"{where}: {name} runs a shell"
        assert not any(k.arg == "shell" and not (isinstance(k.value, ast.Constant) and k.value.value is False)
                       for k in call.keywords), f"{where}: shell="
        first = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "args"), None)
        assert not (isinstance(first, ast.Constant) and isinstance(first.value, str)), f"{where}: a command string"
        assert not isinstance(first, ast.JoinedStr | ast.BinOp), f"{where}: a command built as a string"
