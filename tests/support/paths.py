"""Where the repository and the tests' data files are, wherever a test file sits."""

from pathlib import Path

#: The repository's root (the folder holding ``pyproject.toml``).
REPO = Path(__file__).resolve().parents[2]
#: Files the tests read: saved pages and the like.
DATA = REPO / "tests" / "data"
