"""Web research as a thin task script: quote the requested categories from a site.

The script holds no answer and no route: it says which site may be read (``url`` and
``allowed_origins``), what counts as evidence for each category (``markers``) and where the
report goes (``output``). Which links to open, which sections to read and what to record
is chosen at run time, by the caller step by step or by a delegated model.

    external-query check-task examples/research_task.py
    external-query run-task examples/research_task.py \\
        --goal 'Quote the requested categories' --config settings.toml \\
        --inputs '{"url": "https://docs.example.org/",
                   "allowed_origins": ["https://docs.example.org"],
                   "markers": {"requirements": "Python 3.11"},
                   "output": "local-results/research.json"}' --max-steps 20 --timeout 120
"""

from external_query_service.toolkit import (
    EvidenceTask,
    MarkerVerifier,
    RuntimeInputs,
    TaskBudget,
    TaskScript,
    WebBudget,
    WebToolkit,
)


def build(inputs: RuntimeInputs) -> EvidenceTask:
    """The registered task: one web toolkit inside the caller's origins, and a verifier that
    backs a category only with a captured passage holding its marker."""
    web = WebToolkit(
        inputs["url"],
        inputs["allowed_origins"],
        budget=WebBudget(max_pages=20, max_bytes=5_000_000),
    )
    return EvidenceTask.from_inputs(
        inputs, toolkits=[web], verifier=MarkerVerifier(inputs["markers"])
    )


workflow = TaskScript(
    build,
    source="web",
    name="research",
    description="Quote each requested category from the allowed site, with its source.",
    budget=TaskBudget(max_pages=20, max_depth=2),
)
