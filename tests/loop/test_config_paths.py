"""A run started from the command line names its files by absolute paths: it resumes from any working directory."""

from __future__ import annotations

import json

import numpy as np
import torch

from activebayes.cli import main
from activebayes.data import load_dataset, write_memmap


def test_relative_costs_and_data_dir_flags_are_stored_absolute_and_resume_elsewhere(tmp_path, monkeypatch):
    work = tmp_path / "work"
    work.mkdir()
    digits = load_dataset("digits", split="train")  # its images as a memory-mapped pool in the folder "data"
    pixels = (digits.inputs[:, 0] - digits.inputs.min()) / (digits.inputs.max() - digits.inputs.min()) * 255
    write_memmap(work / "data", pixels.round().to(torch.uint8).numpy(), targets=digits.targets.numpy(),
                 classes=digits.classes, progress=False)
    np.save(work / "costs.npy", np.linspace(1.0, 2.0, len(digits)))
    monkeypatch.chdir(work)
    code = main(["run", "--dataset", "memmap", "--no-test", "--costs", "costs.npy", "--cost-budget", "1e6",
                 "--data-dir", "data", "--budget", "30",
                 "--batch-size", "5", "--num-samples", "4", "--eval-samples", "4", "--mean-samples", "4",
                 "--cold-start", "none", "--strategy", "bald", "--max-epochs", "2", "--out", str(tmp_path / "run"),
                 "--quiet"])
    assert code == 0
    stored = json.loads((tmp_path / "run" / "config.json").read_text())
    assert (stored["costs_file"], stored["data_dir"]) == (str(work / "costs.npy"), str(work / "data"))
    monkeypatch.chdir(tmp_path)  # elsewhere: the costs are still found
    assert main(["resume", str(tmp_path / "run"), "--budget", "40", "--quiet"]) == 0
    last = (tmp_path / "run" / "rounds.jsonl").read_text().splitlines()[-1]
    assert json.loads(last)["n_labelled"] == 40
