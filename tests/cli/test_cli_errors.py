"""The CLI turns only the library's own user errors into one-line messages; bugs keep their traceback."""

from __future__ import annotations

import sys

import pytest

import activebayes.cli as cli_module
from activebayes.cli import main
from activebayes.errors import ActiveBayesError, InvalidArgumentError


def test_a_user_error_is_one_line(tmp_path, capsys, monkeypatch):
    def refuse(*args, **kwargs):
        raise InvalidArgumentError("budget must be larger than initial_size, got 10 and 20")

    monkeypatch.setattr(cli_module, "run_experiment", refuse)
    assert main(["run", "--out", str(tmp_path / "r"), "-q"]) == 1
    assert capsys.readouterr().err == "error: --budget must be larger than initial_size, got 10 and 20\n"


@pytest.mark.parametrize("bug", [ValueError("shapes do not match"), TypeError("unsupported operand"),
                                 KeyError("metrics")])
def test_a_bug_keeps_its_traceback(tmp_path, monkeypatch, bug):
    def broken(*args, **kwargs):
        raise bug

    monkeypatch.setattr(cli_module, "run_experiment", broken)
    with pytest.raises(type(bug)):
        main(["run", "--out", str(tmp_path / "r"), "-q"])


def test_library_errors_are_user_errors_and_builtin_types():
    from activebayes.data import DataError
    from activebayes.labelling import AnswerFileError
    from activebayes.rundir import RunDirectoryError

    for error_type in (DataError, AnswerFileError, RunDirectoryError, InvalidArgumentError):
        assert issubclass(error_type, ActiveBayesError) and issubclass(error_type, ValueError)


def test_ctrl_c_while_the_cli_loads_is_one_line(monkeypatch, capsys):
    """The entry point catches an interrupt during the imports (torch's first second), too."""
    import types

    from activebayes import _entry

    loading = types.ModuleType("activebayes.cli")

    def interrupted(name):
        raise KeyboardInterrupt

    loading.__getattr__ = interrupted
    monkeypatch.setitem(sys.modules, "activebayes.cli", loading)
    with pytest.raises(SystemExit) as stopped:
        _entry.main()
    assert stopped.value.code == 130 and capsys.readouterr().err == "interrupted\n"
