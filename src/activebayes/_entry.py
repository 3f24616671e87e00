"""The ``activebayes`` command's entry point: Ctrl-C while torch and the CLI load (the first
second or two) stops with one line, as it does later, instead of an import traceback."""

from __future__ import annotations

import sys


def main() -> None:
    try:
        from activebayes.cli import main as cli_main
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        sys.exit(130)
    sys.exit(cli_main())
