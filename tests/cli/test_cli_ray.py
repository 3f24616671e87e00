"""`--ray`: the loop scores its pool on a local Ray cluster and picks what one process picks."""

from __future__ import annotations

import json

import pytest

from activebayes.cli import main

# Ray tests share one pytest-xdist worker (--dist loadgroup): one Ray at a time on a small machine
pytestmark = pytest.mark.xdist_group("ray")

pytest.importorskip("ray")

ARGS = ["--budget", "30", "--validation-size", "50", "--max-epochs", "3", "--num-samples", "4",
        "--eval-samples", "4", "--no-test", "--quiet", "--cold-start", "none"]  # Ray scores from round one


def _acquired(path):
    return [json.loads(line)["acquired"] for line in (path / "rounds.jsonl").read_text().splitlines()]


@pytest.mark.slow
def test_run_on_ray_picks_what_one_process_picks(tmp_path, capsys):
    assert main(["run", "--strategy", "power_bald", "--out", str(tmp_path / "local"), *ARGS]) == 0
    assert main(["run", "--strategy", "power_bald", "--ray", "--ray-workers", "2",
                 "--out", str(tmp_path / "ray"), *ARGS]) == 0, capsys.readouterr().err
    assert _acquired(tmp_path / "ray") == _acquired(tmp_path / "local")
    assert any(_acquired(tmp_path / "local"))


def test_ray_workers_without_ray_is_a_one_line_error(tmp_path, capsys):
    code = main(["run", "--ray-workers", "2", "--out", str(tmp_path / "x"), *ARGS])
    err = capsys.readouterr().err
    assert code == 1 and "--ray-workers needs --ray" in err and err.count("\n") == 1


def test_an_unreachable_ray_address_is_a_one_line_error_within_seconds(tmp_path, capsys):
    """ray.init retries an address nothing listens on for minutes; the command says so at once."""
    import socket
    import time

    with socket.socket() as probe:  # a port that was free a moment ago: nothing listens on it
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    started = time.monotonic()
    code = main(["run", "--ray-address", f"127.0.0.1:{port}", "--out", str(tmp_path / "x"), *ARGS])
    err = capsys.readouterr().err
    assert code == 1 and err.count("\n") == 1 and f"cannot connect to 127.0.0.1:{port}" in err
    assert time.monotonic() - started < 30 and not (tmp_path / "x").exists()
