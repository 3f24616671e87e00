"""What the command-line tests share."""

from __future__ import annotations

from activebayes.cli import main

#: quick settings for command-line runs (the ``fast_config`` fixture writes them to a file)
FAST_TOML = """
initial_size = 20
validation_size = 50
num_samples = 4
eval_samples = 4
cold_start = "none"
[fit_options]
max_epochs = 5
min_samples_per_epoch = 1024
patience = 2
"""


def run_cli(capsys, *args: object) -> tuple[int, str, str]:
    """``activebayes ARGS`` in this process: its exit status, stdout and stderr."""
    code = main([str(a) for a in args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err
