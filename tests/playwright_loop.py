"""Loop fixtures for the modules that drive a browser (import them there, never load this as a plugin).

Playwright's sync API keeps an event loop running on the test thread: pytest-jupyter's autouse loop
and server-cleanup fixtures (which close or run the thread's current loop) are replaced, in those
modules only, by these two, which leave Playwright's loop alone. Everywhere else pytest-jupyter's own
fixtures must stay in force (they set the loop the in-process server and its client run on).
"""

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
