"""A game day's window (chaos.gameday.window): days and hours in a time zone, past midnight,
absolute bounds, and what it says when it is closed."""

from datetime import UTC, datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest

from chaos.gameday._check import Problems
from chaos.gameday.window import parse

SHANGHAI = ZoneInfo("Asia/Shanghai")


def window(**raw):
    problems = Problems()
    found = parse(raw, "window", problems)
    assert problems.lines == [] and found is not None
    return found


WEEKDAYS = window(days=["mon", "tue", "wed", "thu", "fri"], **{"from": "10:00", "to": "16:00"}, timezone="Asia/Shanghai")


@pytest.mark.parametrize("at, is_open", [
    (datetime(2025, 6, 2, 10, 0, tzinfo=SHANGHAI), True),  # Monday: from is inclusive
    (datetime(2025, 6, 2, 9, 59, 59, tzinfo=SHANGHAI), False),
    (datetime(2025, 6, 2, 15, 59, 59, tzinfo=SHANGHAI), True),
    (datetime(2025, 6, 2, 16, 0, tzinfo=SHANGHAI), False),  # to is exclusive
    (datetime(2025, 6, 7, 11, 0, tzinfo=SHANGHAI), False),  # Saturday
    (datetime(2025, 6, 2, 2, 0, tzinfo=UTC), True),  # 10:00 in Shanghai
    (datetime(2025, 6, 1, 23, 59, tzinfo=UTC), False),  # Sunday in UTC, Monday 07:59 in Shanghai
    (datetime(2025, 6, 6, 7, 59, tzinfo=UTC), True),  # Friday 15:59 in Shanghai
    (datetime(2025, 6, 6, 8, 0, tzinfo=UTC), False),
])
def test_a_weekday_window_in_its_own_time_zone(at, is_open):
    assert WEEKDAYS.is_open(at) is is_open


def test_a_window_past_midnight_belongs_to_the_day_it_opens():
    friday_night = window(days=["fri"], **{"from": "22:00", "to": "02:00"}, timezone="Asia/Shanghai")

    def at(day, hour, minute=0):  # June 2025: the 6th is a Friday
        return datetime(2025, 6, day, hour, minute, tzinfo=SHANGHAI)

    assert friday_night.is_open(at(6, 22)) and friday_night.is_open(at(7, 1, 59))
    assert not friday_night.is_open(at(7, 2)) and not friday_night.is_open(at(6, 21, 59))
    assert not friday_night.is_open(at(5, 23)) and not friday_night.is_open(at(7, 22, 30))
    assert friday_night.describe() == "fri 22:00-02:00 Asia/Shanghai"


def test_to_may_be_the_end_of_the_day():
    evening = window(**{"from": "18:00", "to": "24:00"}, timezone="UTC")
    assert evening.is_open(datetime(2025, 6, 2, 23, 59, 59, tzinfo=UTC))
    assert not evening.is_open(datetime(2025, 6, 3, 0, 0, tzinfo=UTC))
    assert evening.describe() == "every day 18:00-24:00 UTC"


def test_absolute_bounds_are_inclusive_and_combine_with_the_days():
    start = datetime(2025, 6, 2, 10, 30, tzinfo=timezone(timedelta(hours=8)))
    june = window(not_before=start.isoformat(), not_after=(start + timedelta(days=4)).isoformat())
    assert june.is_open(start) and june.is_open(start + timedelta(days=4))
    assert not june.is_open(start - timedelta(seconds=1)) and not june.is_open(start + timedelta(days=4, seconds=1))
    both = window(days=["mon"], timezone="Asia/Shanghai", not_before=start.isoformat())
    assert not both.is_open(datetime(2025, 6, 2, 10, 0, tzinfo=SHANGHAI))  # Monday, but before not_before
    assert both.is_open(datetime(2025, 6, 2, 10, 30, tzinfo=SHANGHAI))
    assert not both.is_open(datetime(2025, 6, 3, 10, 30, tzinfo=SHANGHAI))  # Tuesday


def test_yaml_timestamps_are_taken_as_read():
    start = datetime(2025, 6, 2, 10, 0, tzinfo=timezone(timedelta(hours=8)))
    assert window(not_before=start).not_before == start


def test_the_days_follow_daylight_saving_time():
    berlin = window(days=["mon", "fri"], **{"from": "10:00", "to": "16:00"}, timezone="Europe/Berlin")
    assert not berlin.is_open(datetime(2025, 3, 28, 8, 30, tzinfo=UTC))  # Friday 09:30 CET
    assert berlin.is_open(datetime(2025, 3, 31, 8, 30, tzinfo=UTC))  # Monday 10:30 CEST, after the change


def test_closed_says_what_time_it_is_there_and_when_it_opens_next():
    saturday = datetime(2025, 6, 7, 3, 0, tzinfo=UTC)
    assert WEEKDAYS.closed(saturday) == ("outside the window (mon-fri 10:00-16:00 Asia/Shanghai): it is Sat 2025-06-07 "
                                         "11:00 Asia/Shanghai; it opens next Mon 2025-06-09 10:00 Asia/Shanghai")
    assert WEEKDAYS.closed(datetime(2025, 6, 2, 12, 0, tzinfo=SHANGHAI)) is None
    assert WEEKDAYS.next_open(datetime(2025, 6, 2, 12, 0, tzinfo=SHANGHAI)) == datetime(2025, 6, 2, 12, 0,
                                                                                       tzinfo=SHANGHAI)


def test_absolute_bounds_say_when_or_that_it_never_opens_again():
    start = datetime(2025, 6, 2, 10, 0, tzinfo=timezone(timedelta(hours=8)))
    bounded = window(not_before=start.isoformat(), not_after=(start + timedelta(hours=6)).isoformat())
    assert bounded.closed(start - timedelta(hours=1)) == (
        "outside the window (not before 2025-06-02T10:00:00+08:00, not after 2025-06-02T16:00:00+08:00): it is "
        "2025-06-02T09:00:00+08:00; it opens next 2025-06-02T10:00:00+08:00")
    assert bounded.closed(start + timedelta(hours=7)).endswith("; it does not open again")
    # Recurring hours that fall after not_after never open either.
    late = window(**{"from": "20:00", "to": "22:00"}, timezone="Asia/Shanghai", not_after=start.isoformat())
    assert late.next_open(start - timedelta(days=1)) == datetime(2025, 6, 1, 20, 0, tzinfo=SHANGHAI)
    assert late.next_open(start - timedelta(hours=1)) is None


def test_the_window_as_the_journal_keeps_it():
    assert WEEKDAYS.to_json() == {"describe": "mon-fri 10:00-16:00 Asia/Shanghai",
                                  "days": ["mon", "tue", "wed", "thu", "fri"], "timezone": "Asia/Shanghai",
                                  "from": "10:00", "to": "16:00"}


def test_an_empty_window_is_refused():
    problems = Problems()
    assert parse({}, "window", problems) is None
    assert problems.lines == ["window: expected at least one of days, from, to, timezone, not_before, not_after; "
                              "leave the window out for none"]


def test_a_window_in_the_weekday_order_whatever_the_order_given():
    assert window(days=["fri", "mon"], timezone="UTC").days == (0, 4)
    assert window(days=["sat", "sun", "mon"], timezone="UTC").describe() == "mon, sat-sun 00:00-24:00 UTC"
