"""Where a game day's record goes: each experiment's journal and the game day's own, as JSON files
in a folder, and the game day's in a ConfigMap (a scheduled game day with no volume to keep)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Protocol

from chaos.errors import Conflict
from chaos.run import Result

SUMMARY_KEY = "gameday.json"
SUMMARY_LABELS = {"app.kubernetes.io/name": "kilocard", "app.kubernetes.io/component": "gameday-summary"}


class SummaryMaps(Protocol):
    """What `publish` needs of chaos.kube.Kube."""

    def create_config_map(self, namespace: str, body: dict[str, Any]) -> Any: ...

    def patch_config_map(self, namespace: str, name: str, patch: dict[str, Any]) -> Any: ...


def _dump(data: dict[str, Any]) -> str:
    return json.dumps(data, indent=2, default=str)


def save_experiment(folder: Path, step_id: str, result: Result) -> Path:
    """One experiment's journal, named for its step, file and run: step-3-s1-kill-one-replica-<run>.json."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{step_id}-{result.path.stem}-{result.run_id or 'invalid'}.json"
    path.write_text(_dump(result.journal))
    return path


def write(folder: Path, name: str, day: dict[str, Any]) -> Path:
    """The game day's journal (chaos.gameday.day.GameDay.to_json) as `name` in `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(_dump(day))
    return path


def publish(kube: SummaryMaps, namespace: str, name: str, day: dict[str, Any]) -> None:
    """The game day's journal in ConfigMap `namespace/name` (key gameday.json), created or replaced."""
    data = {SUMMARY_KEY: _dump(day)}
    try:
        kube.create_config_map(namespace, {"metadata": {"name": name, "labels": SUMMARY_LABELS}, "data": data})
    except Conflict:  # an earlier game day's: this one replaces it
        kube.patch_config_map(namespace, name, {"data": data})
