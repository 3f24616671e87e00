"""The command line shows a warning as one line, ``warning: MESSAGE``, not Python's
``FILE:LINE: UserWarning: ...`` followed by the library's source line; and a program option given
after the command says where it goes."""

from __future__ import annotations

import subprocess
import sys
import warnings

from activebayes.cli import main


def _table(tmp_path):
    path = tmp_path / "dup.csv"
    rows = ["body,team"] + [f"router {i} down,network" for i in range(12)] + [f"invoice {i} wrong,billing"
                                                                            for i in range(12)]
    rows += ["router 0 down,billing"]  # the same text as row 1, another label
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


def test_a_library_warning_is_one_line_naming_no_source_file(tmp_path):
    table = _table(tmp_path)
    done = subprocess.run(
        [sys.executable, "-m", "activebayes", "--threads", "1", "run", "--table", str(table),
         "--text-column", "body", "--label-column", "team", "--budget", "24", "--initial-size", "20",
         "--batch-size", "4", "--validation-size", "0", "--max-epochs", "1", "--out", str(tmp_path / "run"), "-q"],
        capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stderr.splitlines() if "identical content" in line]
    assert len(lines) == 1 and lines[0].startswith(f"warning: {table}: column 'team': 1 group(s) of rows")
    assert "UserWarning" not in done.stderr and ".py:" not in done.stderr and "return load_table" not in done.stderr


def test_in_process_the_callers_warning_display_comes_back(capsys):
    before = warnings.showwarning
    assert main(["list", "posteriors"]) == 0
    assert warnings.showwarning is before


def test_another_packages_warning_names_its_kind_and_file(capsys):
    from activebayes import cli

    cli._show_warning(DeprecationWarning("old\n  api"), DeprecationWarning, "/somewhere/else/pkg/mod.py", 3)
    assert capsys.readouterr().err == "warning: old api (DeprecationWarning, mod.py)\n"
    cli._show_warning(UserWarning("ours"), UserWarning, cli.__file__, 3)
    assert capsys.readouterr().err == "warning: ours\n"


def test_threads_after_the_command_says_where_it_goes(capsys):
    for argv, command in ((["run", "--threads", "1"], "run"), (["resume", "somewhere", "--threads=2"], "resume")):
        assert main(argv) == 2
        expected = f"error: --threads goes before the command: activebayes --threads N {command} ...\n"
        assert capsys.readouterr().err == expected


def test_a_commands_option_before_the_command_says_where_it_goes(capsys):
    """``activebayes -q run`` (a command's option given to the program) names the command it belongs after."""
    cases = ((["-q", "run", "--budget", "30"], "error: -q goes after the command: activebayes run -q ... "
              "(an option of compare, convert, label, query, report, resume, run)\n"),
             (["--threads", "1", "--out", "x", "compare"], "error: --out goes after the command: activebayes compare "
              "--out ... (an option of compare, export, run)\n"),
             (["--out", "x"], "error: --out goes after the command: activebayes COMMAND --out ... "
              "(an option of compare, export, run)\n"))
    for argv, expected in cases:
        assert main(argv) == 2
        assert capsys.readouterr().err == expected
    # an option no command has keeps click's own message
    assert main(["--frob", "run"]) == 2
    assert capsys.readouterr().err == "error: No such option '--frob'. (see `activebayes --help`)\n"
