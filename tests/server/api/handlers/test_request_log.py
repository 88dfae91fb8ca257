"""The per-request debug line is skipped only when no handler would write it."""

import logging

from hive_lab_server.api.handlers.base import shows_debug


def test_shows_debug_follows_handlers_and_propagation():
    parent = logging.getLogger("hive-test-request-log")
    child = logging.getLogger("hive-test-request-log.app")
    parent.setLevel(logging.DEBUG)
    parent.propagate = False  # as traitlets sets up an app's logger (pytest's capture sits on the root)
    quiet = logging.StreamHandler()
    quiet.setLevel(logging.WARNING)
    parent.addHandler(quiet)
    try:
        assert not shows_debug(child)  # DEBUG-level logger, but its only handler drops debug records
        loud = logging.StreamHandler()
        loud.setLevel(logging.DEBUG)
        parent.addHandler(loud)
        assert shows_debug(child)  # a parent's handler writes them
        child.propagate = False
        assert not shows_debug(child)
        child.propagate = True
        parent.setLevel(logging.INFO)
        assert not shows_debug(child)  # the logger itself drops them
        parent.removeHandler(loud)
    finally:
        parent.removeHandler(quiet)
        parent.setLevel(logging.NOTSET)
        parent.propagate = True
