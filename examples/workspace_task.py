"""Repository investigation as a thin task script: quote source lines for each category.

The script gives the permitted folder (``root``), optional literal search terms
(``queries``), the markers that back each category and the report path. The workspace
tools read plain files under the root only (no links, no execution of what they read).

    external-query check-task examples/workspace_task.py
    external-query run-task examples/workspace_task.py --goal 'Quote the implementation' \\
        --inputs '{"root": "permitted-corpus", "queries": ["verify_token"],
                   "markers": {"implementation": "return verify_token"},
                   "output": "local-results/workspace.json"}' --policy walk
"""

from external_query_service.toolkit import (
    EvidenceTask,
    MarkerVerifier,
    RuntimeInputs,
    TaskScript,
    WorkspaceToolkit,
)


def build(inputs: RuntimeInputs) -> EvidenceTask:
    """The registered task: one workspace toolkit over the caller's root (resolved by the
    runner against the caller's folder), and a marker verifier."""
    assert inputs.root is not None  # the runner checked a workspace task has one
    files = WorkspaceToolkit(inputs.root, inputs.task_inputs.queries)
    return EvidenceTask.from_inputs(
        inputs, toolkits=[files], verifier=MarkerVerifier(inputs["markers"])
    )


workflow = TaskScript(
    build,
    source="workspace",
    name="workspace-investigation",
    description="Quote the source lines that back each requested category.",
)
