"""Browser tests run no in-process Jupyter server, and Playwright's sync API keeps an event loop
running on the test thread: pytest-jupyter's autouse loop and server-cleanup fixtures (which close
or run the thread's current loop) are replaced here by ones that leave Playwright's loop alone."""

import asyncio

import pytest


@pytest.fixture(autouse=True)
def jp_asyncio_loop():
    loop = asyncio.new_event_loop()
    yield loop
    loop.close()


@pytest.fixture(autouse=True)
def jp_server_cleanup():
    yield
