"""The `kilocard_*` configuration keys are read in one place (chaos.settings), typed."""

import re
from dataclasses import fields
from pathlib import Path

import pytest

from chaos.errors import SpecError
from chaos.settings import Settings, key
from chaos.vocabulary import local_testbed_prometheus

ROOT = Path(__file__).parents[2]


def test_each_key_is_read_typed_and_a_key_left_out_or_null_takes_its_default():
    found = Settings.of({"kilocard_run_id": "r1", "kilocard_ledger_dir": "/var/lib/k", "kilocard_scrape_interval": "5",
                         "kilocard_context": None, "kilocard_prometheus_url": "", "other": 1})
    assert found == Settings(run_id="r1", ledger_dir=Path("/var/lib/k"), scrape_interval=5.0)
    assert found.prometheus_url == local_testbed_prometheus() and Settings.of(None) == Settings()


def test_a_scrape_interval_that_is_no_number_is_invalid_input_naming_its_key():
    with pytest.raises(SpecError, match="configuration.kilocard_scrape_interval: expected seconds, got 'soon'"):
        Settings.of({"kilocard_scrape_interval": "soon"})


def test_a_setting_is_named_by_key_and_an_unknown_one_is_refused():
    assert key("kubeconfig") == "kilocard_kubeconfig"
    with pytest.raises(KeyError):
        key("kubconfig")


def test_no_module_but_chaos_settings_spells_a_settings_key():
    spelled = re.compile("[\"'](" + "|".join(key(f.name) for f in fields(Settings)) + ")[\"']")
    found = [(str(p.relative_to(ROOT)), line.strip()) for base in ("chaos", "probes") for p in (ROOT / base).rglob("*.py")
             if p.name != "settings.py" for line in p.read_text().splitlines() if spelled.search(line)]
    # The JUnit property the pytest plugin writes is named like the key; it is no configuration read.
    assert [f for f in found if "user_properties" not in f[1] and '("kilocard_run_id", result.run_id)' not in f[1]] == []
