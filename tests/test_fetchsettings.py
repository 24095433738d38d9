"""The settings a crawl records of how it fetched, and a recrawl gives again."""

import json

from scrapy.settings import Settings

from focused.fetchsettings import FETCH_SETTINGS, given_fetch_settings, restore_fetch_settings
from focused.settingchecks import allow_status_codes_as_numbers


def command_line(given: dict) -> Settings:
    """The project's settings, with ``given`` as if given with -s."""
    settings = Settings()
    settings.setmodule("focused.settings")
    settings.setdict(given, priority="cmdline")
    return settings


def test_a_crawl_records_the_fetch_settings_given_on_its_command_line_alone():
    settings = command_line(
        {
            "USER_AGENT": "birdwatch/2.0",
            "DOWNLOAD_DELAY": "1.5",
            "HTTPERROR_ALLOWED_CODES": "403,451",
            "ROBOTS_RETRY_FAILED_AFTER": "0",  # a failed robots.txt kept, as the crawl kept it
            "HTTPAUTH_USER": "ann",  # secrets are never kept
            "HTTPAUTH_PASS": "s3cret",
            "HTTPAUTH_DOMAIN": "a.test",  # given with them again (the command checks them first)
            "DEFAULT_REQUEST_HEADERS": '{"Cookie": "session=1"}',
            "FOCUSED_DB": "/tmp/elsewhere.sqlite3",  # where: the recrawl is told
            "CLOSESPIDER_PAGECOUNT": "10",  # a crawl's budget, no recrawl's
        }
    )
    allow_status_codes_as_numbers(settings)  # as the crawl does before it records
    settings.set("ROBOTSTXT_OBEY", False, priority="project")  # a settings module's: not kept
    assert given_fetch_settings(settings) == {
        "USER_AGENT": "birdwatch/2.0",
        "DOWNLOAD_DELAY": "1.5",
        "HTTPERROR_ALLOWED_CODES": [403, 451],
        "ROBOTS_RETRY_FAILED_AFTER": "0",
    }


def test_a_dict_setting_is_kept_as_a_dict_and_a_value_json_cannot_hold_as_text():
    settings = command_line({"DOWNLOAD_SLOTS": '{"a.test": {"delay": 2}}', "USER_AGENT": {1}})
    kept = given_fetch_settings(settings)
    assert kept == {"DOWNLOAD_SLOTS": {"a.test": {"delay": 2}}, "USER_AGENT": "{1}"}
    recrawl = command_line({})
    restore_fetch_settings(recrawl, kept)
    assert recrawl.getdict("DOWNLOAD_SLOTS") == {"a.test": {"delay": 2}}


def test_an_integer_no_store_can_hold_is_kept_as_text():
    """In a key no check reads: a MongoDB record holds 64 bits, and the crawl's start failed
    there alone with an OverflowError."""
    given = '{"a.test": {"delay": 2, "later": 99999999999999999999}}'
    kept = given_fetch_settings(command_line({"DOWNLOAD_SLOTS": given}))
    assert kept == {"DOWNLOAD_SLOTS": json.dumps(json.loads(given))}
    recrawl = command_line({})
    restore_fetch_settings(recrawl, kept)
    assert recrawl.getdict("DOWNLOAD_SLOTS") == json.loads(given)


def test_a_recrawl_gives_each_recorded_setting_its_own_command_line_does_not():
    settings = command_line({"DOWNLOAD_DELAY": "3"})
    recorded = {
        "USER_AGENT": "birdwatch/2.0",
        "DOWNLOAD_DELAY": "1.5",
        "FOCUSED_DB": "/tmp/x",  # edited in, or of another version: not a fetch setting
    }
    assert restore_fetch_settings(settings, recorded) == {"USER_AGENT": "birdwatch/2.0"}
    assert (settings["USER_AGENT"], settings.getfloat("DOWNLOAD_DELAY")) == ("birdwatch/2.0", 3)
    assert settings.getpriority("USER_AGENT") == settings.getpriority("DOWNLOAD_DELAY")
    assert settings["FOCUSED_DB"] == "focused.sqlite3"
    # Recorded before the field: nothing to give.
    assert restore_fetch_settings(settings, None) == {}


def test_every_fetch_setting_has_a_default_scrapy_or_the_project_documents():
    from focused.setting_names import known_setting_names

    assert set(FETCH_SETTINGS) - known_setting_names() <= {
        name for name in FETCH_SETTINGS if name.startswith("PLAYWRIGHT_")
    }


def test_a_crawl_s_delay_jitter_is_given_to_its_recrawl():
    """Scrapy 2.19's DOWNLOAD_DELAY_JITTER (RANDOMIZE_DOWNLOAD_DELAY's successor, which was
    kept) was not: a crawl spaced exactly with -s DOWNLOAD_DELAY_JITTER=0 was recrawled with
    Scrapy's +-50%."""
    kept = given_fetch_settings(command_line({"DOWNLOAD_DELAY": "2", "DOWNLOAD_DELAY_JITTER": "0"}))
    assert kept == {"DOWNLOAD_DELAY": "2", "DOWNLOAD_DELAY_JITTER": "0"}
    recrawl = command_line({})
    restore_fetch_settings(recrawl, kept)
    assert recrawl.getfloat("DOWNLOAD_DELAY_JITTER") == 0
