"""What the command-line tests share."""

from __future__ import annotations

from activebayes.cli import main


def run_cli(capsys, *args: object) -> tuple[int, str, str]:
    """``activebayes ARGS`` in this process: its exit status, stdout and stderr."""
    code = main([str(a) for a in args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err
