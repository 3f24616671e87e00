"""The Python entry points draw progress bars only when stderr is a terminal, unless told.

Under pytest stderr is a captured file, as when a script's output goes to a pipe or a log:
the default draws nothing there; ``progress=True`` draws the bars anyway.
"""

from __future__ import annotations

import numpy as np

from activebayes.data import convert_to_memmap, write_memmap
from activebayes.experiment import run_comparison, run_experiment
from activebayes.records import LoopConfig
from tests.conftest import FAST_LOOP


def test_runs_and_comparisons_draw_bars_only_on_a_terminal_by_default(tmp_path, capfd):
    config = LoopConfig(**{**FAST_LOOP, "budget": 30, "strategy": "random"})
    run_experiment(config, tmp_path / "quiet", report=False)
    run_comparison(config, ["random"], [0], tmp_path / "quiet-compare", report=False)
    assert "round" not in capfd.readouterr().err
    run_experiment(config, tmp_path / "told", report=False, progress=True)
    assert "round" in capfd.readouterr().err  # tqdm's bar of rounds ("... seed 0: ... round")


def test_memmap_writers_draw_bars_only_on_a_terminal_by_default(tmp_path, capfd):
    from PIL import Image

    pixels = np.zeros((20, 4, 4), dtype=np.uint8)
    write_memmap(tmp_path / "a", pixels, normalization=None)
    (tmp_path / "images").mkdir()
    for i in range(3):
        Image.fromarray(pixels[i]).save(tmp_path / "images" / f"{i}.png")
    convert_to_memmap(tmp_path / "images", tmp_path / "b", size=(4, 4))
    assert "item" not in capfd.readouterr().err
    write_memmap(tmp_path / "c", pixels, normalization=None, progress=True)
    assert "item" in capfd.readouterr().err
