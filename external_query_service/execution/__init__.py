"""How work runs and stops: the page-analysis worker processes, the private event loop behind
the sync API, the question gate shared by every loop and thread, ``with``/``async with``
closing, and the garbage-collector setting of a serving process. See ``README.md``."""
