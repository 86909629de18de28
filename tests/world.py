"""The end-to-end world now lives in the public ``external_query_service.testing``; this
module only keeps the old import path working for tests that still use it."""

from external_query_service.testing import FORECAST, FX, GEO, SEARX, World, article, hit

__all__ = ["FORECAST", "FX", "GEO", "SEARX", "World", "article", "hit"]
