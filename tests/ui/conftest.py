"""Browser tests run no in-process Jupyter server; Playwright's loop is left alone by the fixtures
imported here (see tests/playwright_loop.py)."""

from playwright_loop import jp_asyncio_loop, jp_server_cleanup  # noqa: F401 (fixtures)
