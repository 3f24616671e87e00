"""A labelling project's bad settings name their flag, as `run` does, and create nothing."""

from __future__ import annotations

import pytest

from activebayes.cli import main


@pytest.mark.parametrize(("argv", "expected"), [
    (["label", "{p}", "--dataset", "digts"],
     "error: --dataset: unknown dataset 'digts' (did you mean 'digits'?); expected one of: "),
    (["query", "{p}", "--dataset", "digts"],
     "error: --dataset: unknown dataset 'digts' (did you mean 'digits'?); expected one of: "),
    (["label", "{p}", "--dataset", "digits", "--classes", "a,a"],
     "error: --classes must be two or more distinct names, got ['a', 'a']"),
])
def test_the_flag_is_named_and_nothing_is_created(tmp_path, capsys, argv, expected):
    project = tmp_path / "project"
    assert main([a.format(p=project) for a in argv]) != 0
    err = capsys.readouterr().err
    assert err.startswith(expected) and err.count("\n") == 1
    assert not project.exists()
