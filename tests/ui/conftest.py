"""Browser tests run no in-process Jupyter server; Playwright's loop is left alone by the fixtures
imported here (see tests/fixtures/browser.py)."""

from fixtures.browser import jp_asyncio_loop, jp_server_cleanup  # noqa: F401 (fixtures)
