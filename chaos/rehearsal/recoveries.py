"""How long a replica takes to come back, as measured: the recovery distributions a month of
failures draws from.

A recovery is two parts, measured apart and drawn apart:
    detection  from the failure to the replacement pod being scheduled (the node declared lost
               and its pods evicted; the card's errors seen and the node quarantined and
               drained; for an engine crash, to its restart), per class of failure
               (chaos.rehearsal.rates: gpu, host, network, engine)
    start-up   from scheduled to Ready (image, weights, warm-up), per model
so a model's start-up is measured once, whatever took it down. The samples come from the
journals of faults run on a twin (bench/recovery_phases.py writes them: each replica's
scheduled and Ready times from the recovery recorder, probes.recovery), or are given.
Draws are the samples themselves, uniformly (the empirical distribution): no shape is assumed.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from chaos.errors import SpecError

# Measured on the testbed's production timing by bench/recovery_phases.py (its command and date inside).
MEASURED = Path(__file__).with_name("recoveries-testbed.json")


@dataclass(frozen=True)
class Recoveries:
    detection: dict[str, tuple[float, ...]]  # class of failure -> seconds
    startup: dict[str, tuple[float, ...]]  # model -> seconds
    source: str = ""
    details: dict[str, Any] = field(default_factory=dict, compare=False)  # what the file says of itself

    @classmethod
    def read(cls, path: Path) -> Recoveries:
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            raise SpecError(f"{path}: cannot read recovery samples: {exc}") from None
        problems = []
        parts: dict[str, dict[str, tuple[float, ...]]] = {}
        for part in ("detection", "startup"):
            given = data.get(part) if isinstance(data, dict) else None
            if not isinstance(given, dict):
                problems.append(f"{path}: {part}: expected a mapping of name -> list of seconds")
                continue
            parts[part] = {}
            for name, samples in given.items():
                if (not isinstance(samples, list) or not samples
                        or not all(isinstance(s, int | float) and 0 <= s < float("inf") for s in samples)):
                    problems.append(f"{path}: {part}.{name}: expected a non-empty list of seconds from 0")
                    continue
                parts[part][name] = tuple(float(s) for s in samples)
        if problems:
            raise SpecError("\n".join(problems))
        return cls(parts["detection"], parts["startup"], str(path),
                   {k: v for k, v in data.items() if k not in ("detection", "startup")})

    def with_startup(self, given: list[str]) -> Recoveries:
        """These samples, with `MODEL=SECONDS` start-ups given (one fixed value each)."""
        startup = dict(self.startup)
        for setting in given:
            model, _, seconds = setting.partition("=")
            try:
                value = float(seconds)
            except ValueError:
                value = -1.0
            if not model or not 0 <= value < float("inf"):
                raise SpecError(f"--startup {setting!r}: expected MODEL=SECONDS")
            startup[model] = (value,)
        return Recoveries(self.detection, startup, self.source, self.details)

    def check(self, classes: set[str], models: set[str]) -> None:
        """Every class and model the rehearsal needs has samples, else a SpecError naming them."""
        problems = [f"no detection samples for failures of class {c!r}" for c in sorted(classes - set(self.detection))]
        problems += [f"no start-up samples for model {m!r} (measure it: bench/recovery_phases.py on a twin; or "
                     f"give --startup {m}=SECONDS)" for m in sorted(models - set(self.startup))]
        if problems:
            raise SpecError(f"{self.source or 'recoveries'}: " + "; ".join(problems))

    def draw(self, rng: random.Random, cls: str, model: str) -> tuple[float, float]:
        """(detection, start-up) seconds of one recovery from a failure of class `cls`."""
        return rng.choice(self.detection[cls]), rng.choice(self.startup[model])

    def describe(self) -> dict[str, Any]:
        def summary(samples: tuple[float, ...]) -> dict[str, float]:
            ordered = sorted(samples)
            return {"n": len(ordered), "min": ordered[0], "median": ordered[len(ordered) // 2], "max": ordered[-1]}

        return {"source": self.source, **self.details,
                "detection": {k: summary(v) for k, v in sorted(self.detection.items())},
                "startup": {k: summary(v) for k, v in sorted(self.startup.items())}}
