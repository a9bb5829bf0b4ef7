"""What `pip install kilocard` gives: the wheel built from this checkout, installed in a clean
venv from the package registry, with the toolkit alone (no testbed, no report extra): `kilocard
validate` of the shipped catalog, the schema, and a report whose page says where figures would be."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXTRAS_ONLY = ("matplotlib", "prometheus-client", "cryptography")  # the report's and the testbed's


def run(*argv: str | Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=600, cwd=cwd)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    source = out / "source"  # built from a copy: setuptools leaves build/ and *.egg-info where it builds
    shutil.copytree(ROOT, source, symlinks=True, ignore=shutil.ignore_patterns(
        ".git", ".venv", "reports", "mutants", "build", "*.egg-info", "__pycache__", ".*_cache"))
    done = run(sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--disable-pip-version-check", "-w", out,
               source)
    assert done.returncode == 0, done.stderr
    (found,) = out.glob("kilocard-*.whl")
    return found


def test_the_wheel_carries_the_catalog_the_license_and_the_toolkits_dependencies_alone(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        meta = Parser().parsestr(z.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode())
    shipped = {n.removeprefix("chaos/catalog/") for n in names if n.startswith("chaos/catalog/")}
    here = {str(p.relative_to(ROOT / "experiments")) for p in (ROOT / "experiments").rglob("*.yaml")}
    assert shipped == here and "gamedays/catalog.yaml" in shipped and "incidents/ecc-one-card.yaml" in shipped
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names) and meta["License-Expression"] == "Apache-2.0"
    assert {"chaos/py.typed", "probes/py.typed"} <= names and not any(n.startswith("tests/") for n in names)
    required = [r for r in meta.get_all("Requires-Dist") if "extra ==" not in r]
    assert not [r for r in required if r.startswith(EXTRAS_ONLY)], required
    assert set(meta.get_all("Provides-Extra")) >= {"report", "testbed", "all", "test"}
    assert meta["Project-URL"] and "Typing :: Typed" in meta.get_all("Classifier")


@pytest.mark.long(50)
def test_installed_alone_it_validates_its_own_catalog_and_reports_without_figures(wheel: Path, tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    assert run(sys.executable, "-m", "venv", venv).returncode == 0
    done = run(venv / "bin/python", "-m", "pip", "install", "-q", "--disable-pip-version-check", wheel)
    assert done.returncode == 0, done.stderr
    kilocard = venv / "bin/kilocard"
    for module in ("matplotlib", "prometheus_client", "cryptography"):  # none came with the toolkit
        assert run(venv / "bin/python", "-c", f"import {module}").returncode == 1, module
    catalog = Path(run(kilocard, "catalog", "--path").stdout.strip())
    assert catalog.is_relative_to(venv) and (catalog / "s1-kill-one-replica.yaml").is_file()
    done = run(kilocard, "validate", "-o", "json", catalog, catalog / "gamedays", catalog / "incidents", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    found = json.loads(done.stdout)
    assert len(found) == 19 and all(f["valid"] for f in found), found
    assert [Path(f["file"]).name for f in found[:3]] == ["s1-kill-one-replica.yaml", "s2-isolate-one-card.yaml",
                                                         "s3-ecc-one-tp-member.yaml"]
    listed = run(kilocard, "catalog")
    assert listed.returncode == 0 and "s10-tp16-tcp-resets.yaml" in listed.stdout
    schema = json.loads(run(kilocard, "schema").stdout)
    assert schema["$schema"].startswith("https://json-schema.org/draft/2020-12")
    done = run(kilocard, "report", ROOT / "tests/unit/journals/s3.json", "--out", tmp_path / "reports")
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stdout + done.stderr
    (page,) = (tmp_path / "reports").rglob("*.html")
    text = page.read_text()
    assert "figure not drawn: matplotlib is not installed (pip install &#x27;kilocard[report]&#x27;)" in text
    assert "<svg" not in text
    done = run(kilocard, "testbed", "status")  # the testbed is the [testbed] extra's: said so, no traceback
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert "pip install 'kilocard[testbed]'" in done.stderr
    completion = run(kilocard, "completion", "bash")  # the toolkit's commands, without the testbed's
    assert completion.returncode == 0 and "validate" in completion.stdout, completion.stderr
