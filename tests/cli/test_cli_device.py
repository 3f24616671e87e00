"""--device is checked before anything is loaded or written."""

from __future__ import annotations

import pytest

from activebayes._validation import available_devices, check_device
from activebayes.cli import main
from activebayes.errors import InvalidArgumentError


@pytest.mark.parametrize("device", ["gpu", "cuda:7", "tpu"])
def test_unknown_device_is_one_line_naming_the_flag_and_leaves_nothing(tmp_path, capsys, device):
    if device in available_devices():
        pytest.skip(f"{device} exists here")
    out = tmp_path / "run"
    code = main(["run", "--device", device, "--out", str(out), "--quiet"])
    err = capsys.readouterr().err
    assert code == 1
    assert err.count("\n") == 1 and err.startswith("error: --device")
    assert "cpu" in err and repr(device) in err
    assert not out.exists()


def test_resume_checks_the_device_too(tmp_path, capsys):
    code = main(["resume", str(tmp_path), "--device", "gpu"])
    assert code == 1 and "--device" in capsys.readouterr().err


def test_check_device():
    assert check_device(None) is None
    assert check_device("cpu") == "cpu"
    with pytest.raises(InvalidArgumentError, match="device must be a device this machine has"):
        check_device("gpu")
