"""Settings that contradict each other are one line naming both flags, before anything is written."""

from __future__ import annotations

from activebayes.records import LoopConfig
from tests.cli.cli_helpers import FAST_TOML, run_cli


def test_an_ensemble_size_with_mc_dropout_is_refused(tmp_path, fast_config, capsys):
    """`--ensemble-size 3 --posterior mc_dropout` trained an ensemble, the posterior asked for ignored."""
    out = tmp_path / "r"
    code, _, err = run_cli(capsys, "run", "--config", fast_config, "--budget", 30, "--posterior", "mc_dropout",
                           "--ensemble-size", 3, "--out", out, "--quiet")
    assert code == 1 and err == ("error: --ensemble-size 3 makes a deep ensemble, but --posterior mc_dropout asks for "
                                 "MC dropout: give --posterior ensemble with --ensemble-size N, or leave "
                                 "--ensemble-size out\n"), err
    assert not out.exists()
    # in a --config file too, for compare as for run
    config = tmp_path / "both.toml"
    config.write_text('posterior = "mc_dropout"\nensemble_size = 4\n' + FAST_TOML)
    code, _, err = run_cli(capsys, "compare", "--config", config, "--out", tmp_path / "c", "--quiet")
    assert code == 1 and err.startswith("error: --ensemble-size 4 makes a deep ensemble, but --posterior mc_dropout")
    assert not (tmp_path / "c").exists()
    # --ensemble-size alone (the config's default posterior) is an ensemble as before, and a stored config of one
    # still loads
    from activebayes.cli import _build_config

    assert _build_config({}, {"ensemble_size": 3}).ensemble_size == 3
    assert _build_config({"posterior": "ensemble"}, {"ensemble_size": 3}).posterior == "ensemble"
    assert LoopConfig.from_stored(LoopConfig(ensemble_size=3).to_dict()).ensemble_size == 3


def test_a_target_accuracy_with_neither_a_test_nor_a_validation_set_is_refused(tmp_path, fast_config, capsys):
    """`--no-test --validation-size 0 --target-accuracy 0.3` ran to its budget: the target, checked on the test
    accuracy, else the validation accuracy, had nothing to be checked on."""
    out = tmp_path / "r"
    code, _, err = run_cli(capsys, "run", "--config", fast_config, "--budget", 40, "--no-test", "--validation-size", 0,
                           "--target-accuracy", 0.3, "--out", out, "--quiet")
    assert code == 1 and err == ("error: --target-accuracy 0.3 is checked on the test set, else on the validation "
                                 "set, and this run has neither: --no-test and --validation-size 0; keep some "
                                 "validation items, or drop the target\n"), err
    assert not out.exists()
    code, _, err = run_cli(capsys, "compare", "--config", fast_config, "--budget", 40, "--no-test", "--validation-size",
                           0, "--target-accuracy", 0.3, "--strategy", "random", "--seeds", 0, "--out", tmp_path / "c")
    assert code == 1 and err.startswith("error: --target-accuracy 0.3 is checked on the test set"), err
    assert not (tmp_path / "c").exists()
    # without a test set the target is the validation accuracy's (the headline), as documented
    code, stdout, err = run_cli(capsys, "run", "--config", fast_config, "--budget", 40, "--no-test",
                                "--target-accuracy", 0.01, "--out", tmp_path / "v")
    assert code == 0 and "finished: target validation_accuracy 0.01 reached" in stdout, err
