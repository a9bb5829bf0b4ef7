"""A game day's window: when its steps may start. Outside it nothing starts; a step already
running is not cut short (an experiment reverts its own faults, a pause or a gate ends on its own).

Two parts, both optional, both must hold:
- recurring: `days` (mon..sun), `from` and `to` ("HH:MM", `to` may be "24:00") in `timezone` (an
  IANA name, required with any of them). `from` is inclusive, `to` exclusive. A `to` before `from`
  runs past midnight: `days: [fri], from: "22:00", to: "02:00"` is Friday 22:00 to Saturday 02:00.
- absolute: `not_before` and `not_after`, ISO 8601 with an offset, both inclusive.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from chaos.gameday._check import Problems, shown

DAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")  # datetime.weekday()'s order
DAY_MINUTES = 24 * 60
FIELDS = ("days", "from", "to", "timezone", "not_before", "not_after")


@dataclass(frozen=True)
class Window:
    days: tuple[int, ...] = tuple(range(7))  # weekday numbers, Monday 0
    start: int = 0  # minutes after local midnight, inclusive
    end: int = DAY_MINUTES  # exclusive; below `start`, the window runs past midnight
    zone: ZoneInfo | None = None  # None: no recurring part
    not_before: datetime | None = None
    not_after: datetime | None = None

    def is_open(self, at: datetime) -> bool:
        if self.not_before is not None and at < self.not_before:
            return False
        if self.not_after is not None and at > self.not_after:
            return False
        return self.zone is None or self._recurring_open(at.astimezone(self.zone))

    def _recurring_open(self, local: datetime) -> bool:
        minute, day = local.hour * 60 + local.minute, local.weekday()
        if self.start < self.end:
            return day in self.days and self.start <= minute < self.end
        # Past midnight: the part after `start` belongs to today, the part before `end` to yesterday.
        return (minute >= self.start and day in self.days) or (minute < self.end and (day - 1) % 7 in self.days)

    def next_open(self, at: datetime) -> datetime | None:
        """The first moment from `at` on when the window is open; None if it never opens again."""
        base = max(at, self.not_before) if self.not_before is not None else at
        candidates = [base]
        if self.zone is not None:  # each day's opening, for a week past the base
            local = base.astimezone(self.zone)
            candidates += [_at(local.date() + timedelta(days=d), self.start, self.zone) for d in range(8)]
        return next((c for c in sorted(candidates) if c >= base and self.is_open(c)), None)

    def closed(self, at: datetime) -> str | None:
        """None while the window is open at `at`; else why not, and when it opens next."""
        if self.is_open(at):
            return None
        shown_at = at.astimezone(self.zone) if self.zone is not None else at
        opens = self.next_open(at)
        then = f"it opens next {self._when(opens)}" if opens is not None else "it does not open again"
        return f"outside the window ({self.describe()}): it is {self._when(shown_at)}; {then}"

    def _when(self, at: datetime) -> str:
        if self.zone is None:
            return at.isoformat(timespec="seconds")
        return f"{at.astimezone(self.zone):%a %Y-%m-%d %H:%M} {self.zone.key}"

    def describe(self) -> str:
        parts = []
        if self.zone is not None:
            parts.append(f"{_days(self.days)} {_clock(self.start)}-{_clock(self.end)} {self.zone.key}")
        if self.not_before is not None:
            parts.append(f"not before {self.not_before.isoformat()}")
        if self.not_after is not None:
            parts.append(f"not after {self.not_after.isoformat()}")
        return ", ".join(parts)

    def to_json(self) -> dict[str, Any]:
        found: dict[str, Any] = {"describe": self.describe()}
        if self.zone is not None:
            found.update(days=[DAYS[d] for d in self.days], timezone=self.zone.key,
                         **{"from": _clock(self.start), "to": _clock(self.end)})
        found.update({k: v.isoformat() for k, v in (("not_before", self.not_before), ("not_after", self.not_after))
                      if v is not None})
        return found


def _at(day: date, minute: int, zone: ZoneInfo) -> datetime:
    return datetime.combine(day, time(minute // 60, minute % 60), tzinfo=zone)


def _clock(minute: int) -> str:
    return f"{minute // 60:02d}:{minute % 60:02d}"


def _days(days: tuple[int, ...]) -> str:
    """mon-fri, sat, sun: runs of consecutive days collapsed."""
    if len(days) == 7:
        return "every day"
    runs: list[list[int]] = []
    for d in days:
        if runs and runs[-1][-1] == d - 1:
            runs[-1].append(d)
        else:
            runs.append([d])
    return ", ".join(DAYS[r[0]] if len(r) == 1 else f"{DAYS[r[0]]}-{DAYS[r[-1]]}" for r in runs)


# --- input ----------------------------------------------------------------------------------------
def parse(value: Any, where: str, problems: Problems) -> Window | None:
    """The plan's `window`, every problem added to `problems`; None when there is one."""
    raw = problems.fields(where, value, FIELDS)
    if raw is None:
        return None
    before = len(problems.lines)
    if not raw:
        problems.add(where, f"expected at least one of {', '.join(FIELDS)}; leave the window out for none")
    days = _parse_days(raw["days"], f"{where}.days", problems) if "days" in raw else tuple(range(7))
    start = _parse_clock(raw["from"], f"{where}.from", problems, 0, DAY_MINUTES - 1) if "from" in raw else 0
    end = _parse_clock(raw["to"], f"{where}.to", problems, 1, DAY_MINUTES) if "to" in raw else DAY_MINUTES
    if start is not None and end is not None and start == end:
        problems.add(f"{where}.to", f"the same as from ({_clock(start)}): the window would never open")
    zone = None
    if "timezone" in raw:
        zone = _parse_zone(raw["timezone"], f"{where}.timezone", problems)
    elif {"days", "from", "to"} & set(raw):
        problems.add(f"{where}.timezone", "required with days, from or to: the IANA time zone they are in, "
                                          "like Asia/Shanghai")
    not_before = _parse_instant(raw["not_before"], f"{where}.not_before", problems) if "not_before" in raw else None
    not_after = _parse_instant(raw["not_after"], f"{where}.not_after", problems) if "not_after" in raw else None
    if not_before is not None and not_after is not None and not_after <= not_before:
        problems.add(f"{where}.not_after", f"expected a time after not_before ({not_before.isoformat()}), "
                                           f"got {not_after.isoformat()}")
    if len(problems.lines) > before or days is None or start is None or end is None:
        return None
    return Window(days, start, end, zone, not_before, not_after)


def _parse_days(value: Any, where: str, problems: Problems) -> tuple[int, ...] | None:
    if not isinstance(value, list) or not value:
        problems.add(where, f"expected a list of days ({', '.join(DAYS)}), got {shown(value)}")
        return None
    found: list[int] = []
    for i, day in enumerate(value):
        if day not in DAYS:
            problems.add(f"{where}[{i}]", f"expected a day: one of {', '.join(DAYS)}; got {shown(day)}")
        elif DAYS.index(day) in found:
            problems.add(f"{where}[{i}]", f"{day} is listed twice")
        else:
            found.append(DAYS.index(day))
    return tuple(sorted(found)) if len(found) == len(value) else None


def _parse_clock(value: Any, where: str, problems: Problems, low: int, high: int) -> int | None:
    """Minutes after midnight of "HH:MM", from `low` to `high`."""
    if isinstance(value, int) and not isinstance(value, bool):
        # YAML 1.1 reads an unquoted 10:00 as the sexagesimal number 600.
        problems.add(where, f'expected a time "HH:MM" in quotes (YAML reads an unquoted {value // 60}:'
                            f'{value % 60:02d} as the number {value}), got {value}')
        return None
    parts = value.split(":") if isinstance(value, str) else []
    if len(parts) == 2 and all(len(p) == 2 and p.isdigit() for p in parts) and int(parts[1]) < 60:
        minute = int(parts[0]) * 60 + int(parts[1])
        if low <= minute <= high:
            return minute
    problems.add(where, f'expected a time "HH:MM" from {_clock(low)} to {_clock(high)}, got {shown(value)}')
    return None


def _parse_zone(value: Any, where: str, problems: Problems) -> ZoneInfo | None:
    try:
        if isinstance(value, str) and value:
            return ZoneInfo(value)
    except (ZoneInfoNotFoundError, ValueError):
        pass
    problems.add(where, f"expected an IANA time zone like Asia/Shanghai or UTC, got {shown(value)}")
    return None


def _parse_instant(value: Any, where: str, problems: Problems) -> datetime | None:
    """ISO 8601 with an offset (YAML may hand it over already read as a datetime)."""
    found = value if isinstance(value, datetime) else None
    if isinstance(value, str):
        try:
            found = datetime.fromisoformat(value)
        except ValueError:
            pass
    if found is None:
        problems.add(where, f"expected a date and time in ISO 8601 with an offset, like 2025-06-02T10:00:00+08:00; "
                            f"got {shown(value)}")
        return None
    if found.tzinfo is None or found.utcoffset() is None:
        problems.add(where, f"expected an offset (like +08:00 or Z) after the time, got {shown(value)}")
        return None
    return found
