"""A run directory names its files by absolute paths: it resumes from any working directory."""

from __future__ import annotations

import json

import numpy as np

from activebayes.data import load_dataset
from activebayes.experiment import resume_experiment, run_experiment
from activebayes.loop import LoopConfig


def test_relative_costs_file_and_data_dir_are_stored_absolute_and_resume_elsewhere(tmp_path, monkeypatch):
    work = tmp_path / "work"
    (work / "data").mkdir(parents=True)
    n_items = len(load_dataset("digits", split="train"))
    np.save(work / "costs.npy", np.linspace(1.0, 2.0, n_items))
    monkeypatch.chdir(work)
    config = LoopConfig(costs_file="costs.npy", cost_budget=1e6, data_dir="data", budget=30, initial_size=20,
                        batch_size=5, num_samples=4, eval_samples=4, mean_samples=4, cold_start=None,
                        strategy="bald", fit_options={"max_epochs": 2})
    assert (config.costs_file, config.data_dir) == (str(work / "costs.npy"), str(work / "data"))
    run_experiment(config, tmp_path / "run", progress=False, report=False)
    stored = json.loads((tmp_path / "run" / "config.json").read_text())
    assert (stored["costs_file"], stored["data_dir"]) == (str(work / "costs.npy"), str(work / "data"))
    monkeypatch.chdir(tmp_path)  # elsewhere: the costs are still found
    result = resume_experiment(tmp_path / "run", progress=False, report=False, budget=40)
    assert result.rounds[-1].n_labelled == 40
