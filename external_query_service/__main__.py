"""``python -m external_query_service``: the ``external-query`` program."""

from .cli import run

run()
