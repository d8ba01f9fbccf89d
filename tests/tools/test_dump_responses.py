"""benchmarks.dump_responses: its page section renders the calculator as the site does."""

from benchmarks import dump_responses
from macros import calculator


def test_pages_section_renders_every_page():
    pages = dict(dump_responses._pages())
    for lang in ("es", "en"):
        html = pages["calculator " + lang]
        # every asset the block links is one of the dump's placeholder URLs
        for key in calculator.URL_KEYS:
            assert f'"{key}"' in html, key
        assert pages[f"help estimate {lang}"].startswith("0\n")


def test_site_urls_gives_every_key_the_block_reads():
    conf = {
        "extra": {
            "pyodide": {"path": "/assets/pyodide/"},
            "calc_bundle": "b.zip",
            "calc_snapshot": "s.bin",
            "pyodide_stdlib": "std.zip",
            "pyodide_lock": "lock.json",
            "calc_service_worker": "sw.js",
        }
    }
    urls = calculator.site_urls(conf, "en/calculator/")
    assert tuple(urls) == calculator.URL_KEYS
    assert urls["stdlib"] == "../../std.zip"
