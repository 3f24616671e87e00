"""Each adapter's how-to page runs as written (its one complete Python example)."""

from __future__ import annotations

import re
import runpy
import time
from pathlib import Path

import pytest

GUIDES = Path(__file__).resolve().parents[2] / "docs" / "guides"
PAGES = {"lightning.md": "lightning.pytorch", "huggingface.md": "transformers", "scikit-learn.md": "sklearn"}


def example(page: str) -> str:
    blocks = re.findall(r"```python\n(.*?)```", (GUIDES / page).read_text(encoding="utf-8"), flags=re.DOTALL)
    assert len(blocks) == 1, f"{page}: expected one complete example, found {len(blocks)} python blocks"
    return blocks[0]


@pytest.mark.parametrize("page", sorted(PAGES))
def test_guide_example_runs(page, tmp_path, capsys, monkeypatch):
    pytest.importorskip(PAGES[page])
    monkeypatch.chdir(tmp_path)
    script = tmp_path / "example.py"
    script.write_text(example(page), encoding="utf-8")
    tic = time.perf_counter()
    namespace = runpy.run_path(str(script), run_name="__main__")
    seconds = time.perf_counter() - tic
    out = capsys.readouterr().out
    assert seconds < 60, f"{page}'s example took {seconds:.0f} s; keep it tiny"
    if page == "lightning.md":
        assert "torch.Size([300, 10, 3])" in out
        assert namespace["result"].rounds[-1].n_labelled == 45
    elif page == "huggingface.md":
        assert tuple(namespace["log_probs_N_K_C"].shape) == (200, 8, 2)
        assert len(namespace["loop"].history) == 3
    else:
        assert tuple(namespace["log_probs_N_K_C"].shape) == (500, 20, 10)
        assert len(namespace["picks"].indices) == 5
        assert float(out.split("accuracy")[-1].split()[0]) > 0.8
