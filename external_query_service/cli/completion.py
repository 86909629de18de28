"""``external-query completion SHELL``: the shell code that completes ``external-query``'s
commands and flags (argcomplete's, for bash, zsh or fish).

Exit codes: 0 printed; 2 a shell it does not know.
"""

from __future__ import annotations

import argparse
import sys

from . import PROG
from ._help import Subparsers, add_command

__all__ = ["SHELLS", "register"]

#: The shells ``completion`` writes code for.
SHELLS = ("bash", "zsh", "fish")


def register(commands: Subparsers) -> None:
    """Add the ``completion`` command to ``commands``."""
    completion = add_command(
        commands,
        "completion",
        summary="print shell code completing external-query's commands and flags",
        description="Print shell code that completes external-query's commands and flags.\n"
        "Load it from your shell's start-up file, for example in ~/.bashrc:\n\n"
        '  eval "$(external-query completion bash)"',
        exit_codes=[(0, "the code printed"), (2, "a shell it does not know")],
        examples=[
            'external-query completion bash >> ~/.bashrc   # or: eval "$(...)"',
            "external-query completion fish > ~/.config/fish/completions/external-query.fish",
        ],
    )
    completion.add_argument("shell", choices=SHELLS, help="the shell to complete in")
    completion.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> int:
    # Only this command and a completing shell need it.
    from argcomplete.shell_integration import shellcode

    sys.stdout.write(shellcode([PROG], shell=args.shell))
    return 0
