"""The automatic choice of torch's thread count (activebayes._threads) and who overrides it."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch import nn

import activebayes.cli as cli_module
from activebayes import _threads
from activebayes._threads import (
    FLOPS_PER_THREAD,
    SMALL_WORK_FLOPS,
    ThreadChoice,
    auto_threads,
    automatic_threads,
    busy_cores,
    free_cores,
    resolve_threads,
    threads_for,
    usable_cores,
    work_flops,
)
from activebayes.cli import main
from activebayes.models import MLP, fit, mc_dropout, predict_log_probs


@pytest.fixture
def restore_threads():
    """Tests change torch's process-wide thread count; put it back."""
    previous = torch.get_num_threads()
    yield
    torch.set_num_threads(previous)


@pytest.fixture
def machine(monkeypatch):
    """A fake machine: ``machine(cores, busy)`` mocks the affinity mask, the cgroup quota and the load."""

    def set_machine(cores: int, busy: float) -> None:
        monkeypatch.setattr(_threads.os, "sched_getaffinity", lambda pid: set(range(cores)), raising=False)
        monkeypatch.setattr(_threads, "_cgroup_cpu_quota", lambda: None)
        monkeypatch.setattr(_threads, "_runnable_others", lambda: None)
        monkeypatch.setattr(_threads.os, "getloadavg", lambda: (busy, busy, busy), raising=False)

    return set_machine


@pytest.fixture
def no_env(monkeypatch):
    for name in _threads.THREAD_ENV_VARS:
        monkeypatch.delenv(name, raising=False)


class _Recorder(nn.Module):
    """Records torch's thread count each time the model runs."""

    def __init__(self, net: nn.Module) -> None:
        super().__init__()
        self.net = net
        self.seen: list[int] = []

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.seen.append(torch.get_num_threads())
        return self.net(x)


def _big_cnn() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(1, 64, 3, padding=1), nn.ReLU(), nn.Conv2d(64, 64, 3, padding=1), nn.ReLU(),
        nn.Flatten(), nn.Dropout(0.5), nn.Linear(64 * 28 * 28, 10),
    )


# --------------------------------------------------------------------------- precedence
def test_explicit_threads_win_over_the_environment():
    env = {"OMP_NUM_THREADS": "3", "MKL_NUM_THREADS": "5"}
    assert resolve_threads(2, environ=env) == ThreadChoice(2, "--threads")
    assert resolve_threads(None, environ=env) == ThreadChoice(3, "OMP_NUM_THREADS")
    assert resolve_threads(None, environ={"MKL_NUM_THREADS": "5"}) == ThreadChoice(5, "MKL_NUM_THREADS")
    assert resolve_threads(None, environ={"OMP_NUM_THREADS": "4,2"}) == ThreadChoice(4, "OMP_NUM_THREADS")
    # values OpenMP would ignore are ignored: the automatic rule decides
    assert resolve_threads(None, environ={"OMP_NUM_THREADS": "abc", "MKL_NUM_THREADS": "0"}) is None
    assert resolve_threads(None, environ={}) is None
    for bad in (0, -1, 1.5, True, "2"):
        with pytest.raises(ValueError, match="threads must be an int >= 1"):
            resolve_threads(bad, environ={})


# --------------------------------------------------------------------------- the rule
@pytest.mark.parametrize(("cores", "busy"), [(2, 0.0), (2, 1.0), (2, 3.0), (8, 2.5), (16, 15.9), (4, 0.4)])
def test_free_cores_is_cores_minus_busy_at_least_one(cores, busy):
    assert free_cores(cores=cores, busy=busy) == max(1, math.floor(cores - busy))


def test_small_work_runs_on_one_thread_even_on_an_idle_machine(monkeypatch):
    def unexpected():
        raise AssertionError("the load must not be measured for small work")

    monkeypatch.setattr(_threads, "busy_cores", unexpected)
    monkeypatch.setattr(_threads, "usable_cores", unexpected)
    mlp = MLP(in_features=64, num_classes=10)  # the README main job's model
    work = work_flops(mlp, (1, 8, 8), batch=64)
    assert work < SMALL_WORK_FLOPS
    assert auto_threads(work) == 1
    assert auto_threads(0.0) == 1


def test_busy_machine_gives_one_thread_and_idle_machine_more_for_big_work(machine):
    work = work_flops(_big_cnn(), (1, 28, 28), batch=64)
    assert work >= SMALL_WORK_FLOPS
    machine(cores=2, busy=3.0)  # three CPU-bound competitors on two cores
    assert auto_threads(work) == 1
    machine(cores=8, busy=0.0)
    expected = min(8, math.ceil(work / FLOPS_PER_THREAD))
    assert expected > 1
    assert auto_threads(work) == expected
    assert auto_threads(work, limit=3) == 3
    machine(cores=8, busy=5.0)
    assert auto_threads(work) == 3
    assert auto_threads(None) == 3  # unknown work: the free cores
    # just above the small-work threshold: one thread per FLOPS_PER_THREAD
    assert auto_threads(SMALL_WORK_FLOPS, cores=8, busy=0.0) == math.ceil(SMALL_WORK_FLOPS / FLOPS_PER_THREAD)


def test_auto_threads_validates_its_arguments():
    with pytest.raises(ValueError, match="work_flops must be a number >= 0"):
        auto_threads(-1.0)
    with pytest.raises(ValueError, match="limit must be an int >= 1"):
        auto_threads(1e12, cores=4, busy=0.0, limit=0)


def test_busy_cores_is_the_median_of_instant_samples(monkeypatch):
    samples = iter([3, 3, 0, 7, 3])  # a transient dip and a spike are ignored
    monkeypatch.setattr(_threads, "_runnable_others", lambda: next(samples))
    monkeypatch.setattr(_threads.time, "sleep", lambda seconds: None)
    assert busy_cores() == 3.0


def test_busy_cores_falls_back_to_the_load_average(monkeypatch):
    monkeypatch.setattr(_threads, "_runnable_others", lambda: None)
    monkeypatch.setattr(_threads.os, "getloadavg", lambda: (2.5, 1.0, 0.5), raising=False)
    assert busy_cores() == 2.5


def test_usable_cores_honours_affinity_and_cgroup_quota(monkeypatch):
    monkeypatch.setattr(_threads.os, "sched_getaffinity", lambda pid: {0, 1, 2, 3}, raising=False)
    monkeypatch.setattr(_threads, "_cgroup_cpu_quota", lambda: None)
    assert usable_cores() == 4
    monkeypatch.setattr(_threads, "_cgroup_cpu_quota", lambda: 1.5)
    assert usable_cores() == 2


@pytest.mark.skipif(not Path("/proc/loadavg").exists(), reason="needs Linux /proc")
def test_a_busy_process_is_counted():
    spinner = subprocess.Popen(
        [sys.executable, "-c", "import sys\nprint('ready', flush=True)\nwhile True: pass"],
        stdout=subprocess.PIPE, text=True,
    )
    try:
        assert spinner.stdout.readline().strip() == "ready"
        assert busy_cores() >= 1
    finally:
        spinner.kill()
        spinner.wait()
    # this process's own threads are not counted as "others"
    own = _threads._runnable_others()
    assert own is not None and own >= 0


# --------------------------------------------------------------------------- the work estimate
def _reference_flops(model: nn.Module, x: torch.Tensor) -> int:
    """2 x multiply-adds from the real output shapes: every output of a dense or convolution
    layer costs its fan-in (torch.utils.flop_counter's convention; that module itself takes
    seconds to import)."""
    total = [0]

    def count(module: nn.Module, _inputs: tuple, output: torch.Tensor) -> None:
        if isinstance(module, nn.Linear):
            total[0] += 2 * output.numel() * module.in_features
        elif isinstance(module, nn.Conv2d):
            fan_in = module.in_channels // module.groups * math.prod(module.kernel_size)
            total[0] += 2 * output.numel() * fan_in

    handles = [m.register_forward_hook(count) for m in model.modules()]
    try:
        with torch.no_grad():
            model(x)
    finally:
        for handle in handles:
            handle.remove()
    return total[0]


def test_work_flops_matches_the_real_output_shapes():
    batch = 16
    mlp = nn.Sequential(nn.Flatten(), nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
    reference = _reference_flops(mlp, torch.randn(batch, 1, 8, 8))
    assert work_flops(mlp, (1, 8, 8), batch) == pytest.approx(reference, rel=1e-9)
    same_conv = nn.Conv2d(3, 8, 3, padding=1)  # one output per input position: exact
    reference = _reference_flops(same_conv, torch.randn(batch, 3, 16, 16))
    assert work_flops(same_conv, (3, 16, 16), batch) == pytest.approx(reference, rel=1e-9)
    cnn = _big_cnn()  # 'same' convolutions + a dense layer
    reference = _reference_flops(cnn, torch.randn(batch, 1, 28, 28))
    assert work_flops(cnn, (1, 28, 28), batch) == pytest.approx(reference, rel=1e-9)
    valid_conv = nn.Sequential(nn.Conv2d(1, 32, 5), nn.MaxPool2d(2), nn.Conv2d(32, 32, 5))
    reference = _reference_flops(valid_conv, torch.randn(batch, 1, 28, 28))
    assert work_flops(valid_conv, (1, 28, 28), batch) >= reference  # an upper bound (pooling ignored)


# --------------------------------------------------------------------------- applying it
def test_threads_for_does_nothing_outside_automatic_threads(restore_threads, monkeypatch):
    def unexpected(*args, **kwargs):
        raise AssertionError("the rule must not run outside automatic_threads")

    monkeypatch.setattr(_threads, "auto_threads", unexpected)
    torch.set_num_threads(3)  # a library user's explicit choice
    with threads_for(_big_cnn(), (1, 28, 28), 64) as threads:
        assert threads == 3 == torch.get_num_threads()
    net = _Recorder(MLP(in_features=4, num_classes=3))
    fit(net, (torch.randn(30, 4), torch.randint(0, 3, (30,))), max_epochs=1, min_samples_per_epoch=30, generator=0)
    predict_log_probs(net, torch.randn(5, 4), 2, generator=0)
    assert net.seen and set(net.seen) == {3}
    assert torch.get_num_threads() == 3


def test_fit_and_predict_choose_per_call_inside_automatic_threads(restore_threads, machine, no_env):
    machine(cores=8, busy=0.0)
    torch.set_num_threads(4)  # torch's default at entry: the most the rule may use
    small = _Recorder(MLP(in_features=64, num_classes=10))
    big = _Recorder(mc_dropout(_big_cnn()))
    x_small, x_big, y = torch.randn(64, 1, 8, 8), torch.randn(64, 1, 28, 28), torch.randint(0, 10, (64,))
    with automatic_threads() as choice:
        assert choice == ThreadChoice(4, "auto")
        fit(small, (x_small, y), max_epochs=1, min_samples_per_epoch=64, generator=0)
        predict_log_probs(small, x_small, 2, generator=0)
        assert set(small.seen) == {1}
        assert torch.get_num_threads() == 4  # restored after each call
        fit(big, (x_big, y), max_epochs=1, min_samples_per_epoch=64, generator=0)
        predict_log_probs(big, x_big, 2, generator=0)
        assert set(big.seen) == {4}
        machine(cores=2, busy=3.0)  # the machine became busy: seen at the next call
        big.seen.clear()
        fit(big, (x_big, y), max_epochs=1, min_samples_per_epoch=64, generator=0)
        assert set(big.seen) == {1}
    assert torch.get_num_threads() == 4


def test_automatic_threads_respects_explicit_choices(restore_threads, machine, monkeypatch):
    machine(cores=8, busy=0.0)
    torch.set_num_threads(4)
    big = _Recorder(_big_cnn())
    x = torch.randn(8, 1, 28, 28)
    for requested, env, expected in [(2, {"OMP_NUM_THREADS": "3"}, 2), (None, {"OMP_NUM_THREADS": "3"}, 3)]:
        big.seen.clear()
        with automatic_threads(requested, environ=env) as choice:
            assert choice.threads == expected == torch.get_num_threads()
            predict_log_probs(big, x)  # the per-call rule stays off
        assert set(big.seen) == {expected}
        assert torch.get_num_threads() == 4


# --------------------------------------------------------------------------- the command line
def _threads_during_list(monkeypatch, args: list[str]) -> int:
    seen: list[int] = []

    def strategies() -> list[str]:
        seen.append(torch.get_num_threads())
        return ["bald"]

    monkeypatch.setattr(cli_module, "available_strategies", strategies)
    assert main([*args, "list", "strategies"]) == 0
    assert len(seen) == 1
    return seen[0]


def test_cli_threads_option_env_and_automatic(restore_threads, monkeypatch, machine, no_env, capsys):
    torch.set_num_threads(2)
    assert _threads_during_list(monkeypatch, ["--threads", "3"]) == 3
    assert torch.get_num_threads() == 2  # restored when the command ends
    assert _threads_during_list(monkeypatch, ["--threads", "1"]) == 1
    monkeypatch.setenv("MKL_NUM_THREADS", "3")
    assert _threads_during_list(monkeypatch, []) == 3
    assert _threads_during_list(monkeypatch, ["--threads", "1"]) == 1
    monkeypatch.delenv("MKL_NUM_THREADS")
    machine(cores=2, busy=3.0)  # busy machine, no flag: one thread
    assert _threads_during_list(monkeypatch, []) == 1
    machine(cores=2, busy=0.0)  # idle: the free cores, at most torch's default
    assert _threads_during_list(monkeypatch, []) == 2
    assert torch.get_num_threads() == 2
    assert main(["--threads", "0", "list"]) == 2
    assert "--threads" in capsys.readouterr().err
