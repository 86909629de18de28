"""``python -m external_query_service.cli``: the ``external-query`` command."""

from . import run

run()
