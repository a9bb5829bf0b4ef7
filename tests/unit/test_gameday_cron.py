"""Cron schedules as a Kubernetes CronJob reads them (chaos.gameday.cron): what they accept, and
a refusal that names the field."""

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest

from chaos.errors import SpecError
from chaos.gameday import cron


@pytest.mark.parametrize("text, minutes, hours, days, months, weekdays", [
    ("0 10 * * mon", {0}, {10}, set(range(1, 32)), set(range(1, 13)), {1}),
    ("*/15 10-15 * * MON-FRI", {0, 15, 30, 45}, set(range(10, 16)), set(range(1, 32)), set(range(1, 13)),
     {1, 2, 3, 4, 5}),
    ("5,35 9-17/4 1,15 jan-mar,dec sun", {5, 35}, {9, 13, 17}, {1, 15}, {1, 2, 3, 12}, {0}),
    ("59 23 31 12 6", {59}, {23}, {31}, {12}, {6}),
    ("@hourly", {0}, set(range(24)), set(range(1, 32)), set(range(1, 13)), set(range(7))),
    ("@weekly", {0}, {0}, set(range(1, 32)), set(range(1, 13)), {0}),
    ("@yearly", {0}, {0}, {1}, {1}, set(range(7))),
])
def test_good_schedules(text, minutes, hours, days, months, weekdays):
    parsed = cron.parse(text)
    assert (parsed.minutes, parsed.hours, parsed.days, parsed.months, parsed.weekdays) == (
        minutes, hours, days, months, weekdays)
    assert parsed.text == text


@pytest.mark.parametrize("text, message", [
    ("0 10 * *", "expected 5 fields (minute hour day-of-month month day-of-week) or one of @yearly, @annually, "
                 "@monthly, @weekly, @daily, @midnight, @hourly; got 4 in '0 10 * *'"),
    ("0 10 * * * *", "expected 5 fields (minute hour day-of-month month day-of-week) or one of @yearly, @annually, "
                     "@monthly, @weekly, @daily, @midnight, @hourly; got 6 in '0 10 * * * *'"),
    ("@reboot", "unknown macro '@reboot'; expected one of @yearly, @annually, @monthly, @weekly, @daily, @midnight, "
                "@hourly"),
    ("60 10 * * *", "minute (field 1 of '60 10 * * *'): 60 is out of range; expected 0-59"),
    ("0 24 * * *", "hour (field 2 of '0 24 * * *'): 24 is out of range; expected 0-23"),
    ("0 10 0 * *", "day-of-month (field 3 of '0 10 0 * *'): 0 is out of range; expected 1-31"),
    ("0 10 * 13 *", "month (field 4 of '0 10 * 13 *'): 13 is out of range; expected 1-12 or jan-dec"),
    ("0 10 * jna *", "month (field 4 of '0 10 * jna *'): 'jna' is not a number or a month; expected 1-12 or jan-dec"),
    ("0 10 * * 7", "day-of-week (field 5 of '0 10 * * 7'): 7 is out of range; expected 0-6 or sun-sat"),
    ("0 10 * * mon-fry", "day-of-week (field 5 of '0 10 * * mon-fry'): 'fry' is not a number or a day of the week in "
                         "'mon-fry'; expected 0-6 or sun-sat"),
    ("0 16-10 * * *", "hour (field 2 of '0 16-10 * * *'): '16-10': a range goes from low to high, got 16 to 10"),
    ("*/0 10 * * *", "minute (field 1 of '*/0 10 * * *'): '*/0': a step is a whole number from 1, got '0'"),
    ("*/x 10 * * *", "minute (field 1 of '*/x 10 * * *'): '*/x': a step is a whole number from 1, got 'x'"),
    ("5/10 10 * * *", "minute (field 1 of '5/10 10 * * *'): '5/10': a step goes after * or a range, as in */10 or "
                      "5-59/10"),
    ("1,,2 10 * * *", "minute (field 1 of '1,,2 10 * * *'): '' is not a number; expected 0-59"),
    ("0 10 ? * *", "day-of-month (field 3 of '0 10 ? * *'): '?' is not a number; expected 1-31"),
    ("0 -1 * * *", "hour (field 2 of '0 -1 * * *'): '' is not a number in '-1'; expected 0-23"),
])
def test_bad_schedules_name_the_field(text, message):
    with pytest.raises(SpecError) as err:
        cron.parse(text)
    assert str(err.value) == f"--cron: {message}"


def test_the_day_fields_follow_crons_rule():
    def at(day):  # June 2025: the 2nd is a Monday
        return datetime(2025, 6, day, tzinfo=UTC)

    either = cron.parse("0 10 13 * fri")  # both restricted: the 13th, or a Friday
    assert either.fires_on(at(13)) and either.fires_on(at(6)) and not either.fires_on(at(2))
    fridays = cron.parse("0 10 * * fri")  # one is *: the other decides
    assert fridays.fires_on(at(6)) and not fridays.fires_on(at(12))
    stepped = cron.parse("0 10 */2 * fri")  # */2 restricts (as robfig/cron reads it): either again
    assert stepped.fires_on(at(6)) and stepped.fires_on(at(3)) and not stepped.fires_on(at(2))


def test_the_first_firing_in_a_time_zone_that_a_check_accepts():
    shanghai = ZoneInfo("Asia/Shanghai")
    start = datetime(2025, 6, 2, 0, 0, tzinfo=UTC)  # Monday 08:00 in Shanghai
    weekly = cron.parse("30 10 * * mon")
    assert weekly.first(start, shanghai, lambda _t: True) == datetime(2025, 6, 2, 10, 30, tzinfo=shanghai)
    assert weekly.first(start, shanghai, lambda t: t.day > 2) == datetime(2025, 6, 9, 10, 30, tzinfo=shanghai)
    assert cron.parse("0 0 30 2 *").first(start, UTC, lambda _t: True) is None  # no February 30th
