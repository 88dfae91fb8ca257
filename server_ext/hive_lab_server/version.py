"""The package's version (a leaf module: the app and the OpenAPI document read it)."""

__version__ = "0.1.0"
