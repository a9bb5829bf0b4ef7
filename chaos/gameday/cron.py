"""Cron schedules as a Kubernetes CronJob reads them (robfig/cron's standard syntax), checked here
so a bad one is refused with the field it gets wrong instead of a CronJob that never runs.

Five fields, `minute hour day-of-month month day-of-week`, each a comma list of `*`, `N`, `N-M`,
`*/S` or `N-M/S`; months may be jan..dec and days of the week sun..sat (0 is Sunday; 7 is not
accepted, as Kubernetes does not). Or one of the macros in MACROS. When both day fields are
restricted, a day matching either fires (cron's rule); when one is `*`, the other decides.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta, tzinfo

from chaos.errors import SpecError

MACROS = {"@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *", "@weekly": "0 0 * * 0",
          "@daily": "0 0 * * *", "@midnight": "0 0 * * *", "@hourly": "0 * * * *"}
MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
WEEKDAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")


@dataclass(frozen=True)
class _Field:
    name: str
    low: int
    high: int
    names: tuple[str, ...] = ()  # names for low, low + 1, ...
    unit: str = ""  # what a name is, for messages

    def expected(self) -> str:
        return f"{self.low}-{self.high}" + (f" or {self.names[0]}-{self.names[-1]}" if self.names else "")


FIELDS = (_Field("minute", 0, 59), _Field("hour", 0, 23), _Field("day-of-month", 1, 31),
          _Field("month", 1, 12, MONTHS, "a month"), _Field("day-of-week", 0, 6, WEEKDAYS, "a day of the week"))


@dataclass(frozen=True)
class Cron:
    text: str  # as given
    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]  # of the month
    months: frozenset[int]
    weekdays: frozenset[int]  # 0 is Sunday
    any_day: bool  # day-of-month is `*`
    any_weekday: bool  # day-of-week is `*`

    def fires_on(self, day: datetime) -> bool:
        if day.month not in self.months:
            return False
        in_month, in_week = day.day in self.days, (day.weekday() + 1) % 7 in self.weekdays
        if self.any_day or self.any_weekday:
            return in_month and in_week
        return in_month or in_week

    def first(self, start: datetime, zone: tzinfo, accept: Callable[[datetime], bool],
              days: int = 400) -> datetime | None:
        """The first time from `start` on, within `days`, when the schedule fires (read in `zone`)
        and `accept` holds; None if there is none."""
        local = start.astimezone(zone)
        for offset in range(days + 1):
            day = (local + timedelta(days=offset)).replace(hour=0, minute=0, second=0, microsecond=0)
            if not self.fires_on(day):
                continue
            for hour in sorted(self.hours):
                for minute in sorted(self.minutes):
                    at = day.replace(hour=hour, minute=minute)
                    if at >= start and accept(at):
                        return at
        return None


def parse(text: str, where: str = "--cron") -> Cron:
    """A cron schedule, or a SpecError naming the field that is wrong and what it takes."""
    if not isinstance(text, str):
        raise SpecError(f"{where}: expected a cron schedule like '0 10 * * mon', got {text!r}")
    expression = MACROS.get(text.strip(), text)
    if expression.startswith("@"):
        raise SpecError(f"{where}: unknown macro {text.strip()!r}; expected one of {', '.join(MACROS)}")
    fields = expression.split()
    if len(fields) != len(FIELDS):
        raise SpecError(f"{where}: expected 5 fields ({' '.join(f.name for f in FIELDS)}) or one of "
                        f"{', '.join(MACROS)}; got {len(fields)} in {text!r}")
    values = []
    for n, (spec, raw) in enumerate(zip(FIELDS, fields, strict=True), start=1):
        try:
            values.append(frozenset(v for item in raw.split(",") for v in _item(spec, item)))
        except ValueError as exc:
            raise SpecError(f"{where}: {spec.name} (field {n} of {text!r}): {exc}") from None
    return Cron(text, *values, any_day=fields[2] in ("*", "*/1"), any_weekday=fields[4] in ("*", "*/1"))


def _item(spec: _Field, item: str) -> range:
    """The values of one list item; ValueError says what is wrong with it."""
    base, slash, step_text = item.partition("/")
    step = 1
    if slash:
        if not step_text.isdigit() or int(step_text) < 1:
            raise ValueError(f"{item!r}: a step is a whole number from 1, got {step_text!r}")
        step = int(step_text)
    if base == "*":
        return range(spec.low, spec.high + 1, step)
    low_text, dash, high_text = base.partition("-")
    if slash and not dash:
        raise ValueError(f"{item!r}: a step goes after * or a range, as in */{step} or {base}-{spec.high}/{step}")
    low = _value(spec, low_text, item)
    high = _value(spec, high_text, item) if dash else low
    if high < low:
        raise ValueError(f"{item!r}: a range goes from low to high, got {low_text} to {high_text}")
    return range(low, high + 1, step)


def _value(spec: _Field, text: str, item: str) -> int:
    if text.lower() in spec.names:
        return spec.low + spec.names.index(text.lower())
    if not text.isdigit():
        what = f"not a number or {spec.unit}" if spec.names else "not a number"
        raise ValueError(f"{text!r} is {what}" + (f" in {item!r}" if item != text else "") +
                         f"; expected {spec.expected()}")
    if not spec.low <= int(text) <= spec.high:
        raise ValueError(f"{text} is out of range; expected {spec.expected()}")
    return int(text)
