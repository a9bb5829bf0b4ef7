"""No module assumes NVIDIA unless it is NVIDIA's: outside the NVIDIA-specific agent kinds, the
simulator's dcgm-exporter and the testbed's vendor profiles, no string constant names the
`nvidia.com/gpu` resource or a `DCGM_` field (docstrings, which only describe, are not constants)."""

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NVIDIA_SPECIFIC = {
    "chaos/agent/kinds/ecc.py", "chaos/agent/kinds/xid.py", "chaos/agent/kinds/card_isolate.py",
    "testbed/simulator/dcgm.py", "testbed/accelerators.py",
}
ASSUMPTION = re.compile(r"nvidia\.com/gpu(?![-.\w])|DCGM_")


def _docstrings(tree: ast.AST) -> set[int]:
    ids = set()
    for n in ast.walk(tree):
        if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and n.body:
            first = n.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                ids.add(id(first.value))
    return ids


def assumptions(path: Path) -> list[str]:
    tree = ast.parse(path.read_text())
    docs = _docstrings(tree)
    return [f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}:{n.lineno}: {n.value!r}"
            for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs
            and ASSUMPTION.search(n.value)]


def test_only_nvidia_modules_name_nvidia_resources_or_dcgm_fields():
    found = [hit for package in ("chaos", "probes", "testbed") for path in sorted((ROOT / package).rglob("*.py"))
             if str(path.relative_to(ROOT)) not in NVIDIA_SPECIFIC for hit in assumptions(path)]
    assert not found, "\n".join(found)


def test_the_scan_sees_a_planted_assumption(tmp_path):
    planted = tmp_path / "planted.py"
    planted.write_text('"""Docs may say nvidia.com/gpu."""\nRESOURCE = "nvidia.com/gpu"\nQ = f"x{1}DCGM_FI"\n'
                       'TAINT = "nvidia.com/gpu-error"\n')
    assert [h.split(": ", 1)[1] for h in assumptions(planted)] == ["'nvidia.com/gpu'", "'DCGM_FI'"]
