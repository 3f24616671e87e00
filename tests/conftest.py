from __future__ import annotations

import struct
import sys
import zlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED_MNIST = ROOT.parent / "shared" / "data" / "mnist"


def pytest_collection_modifyitems(config, items):
    """Grouped tests first (``xdist_group``: the Ray tests, each docs page's examples): they are
    the longest units of the parallel run (``--dist loadgroup`` gives each to one worker), and
    one scheduled last keeps a worker busy while the other waits. Order is kept within each part."""
    grouped = [item for item in items if item.get_closest_marker("xdist_group")]
    rest = [item for item in items if not item.get_closest_marker("xdist_group")]
    items[:] = grouped + rest


@pytest.fixture(scope="session")
def mnist_dir() -> Path:
    if not (SHARED_MNIST / "t10k-labels-idx1-ubyte.gz").exists():
        pytest.skip(f"real MNIST files not found at {SHARED_MNIST}")
    return SHARED_MNIST


@pytest.fixture(autouse=True, scope="session")
def _one_torch_thread():
    """Tests run in parallel workers on a 2-core machine: one intra-op thread each."""
    import torch

    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


# Small, fast loop settings shared by the loop / experiment / CLI tests.
FAST_FIT = {"max_epochs": 5, "min_samples_per_epoch": 1024, "patience": 2}
FAST_LOOP = dict(
    dataset="digits",
    initial_size=20,
    validation_size=50,
    batch_size=10,
    budget=50,
    num_samples=4,
    mean_samples=4,
    eval_samples=4,
    fit_options=FAST_FIT,
    cold_start=None,  # tests of one strategy; the default's cold start has its own tests
)


def multilabel_toy(n: int = 300, d: int = 6, c: int = 4, seed: int = 0):
    """A small multi-label dataset: ``[n, d]`` Gaussian inputs, ``[n, c]`` indicators from a
    random linear map (every item has at least one label)."""
    import torch

    from activebayes.data import ArrayDataset

    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, d, generator=g)
    y = ((x @ torch.randn(d, c, generator=g)) > 0.3).long()
    y[y.sum(1) == 0, 0] = 1
    return ArrayDataset(inputs=x, targets=y, classes=tuple("abcd"[:c]), name="toy")


def write_topic_csv(path: Path, topics: dict[str, str], *, rows: int = 60, words: int = 4, seed: int = 0) -> Path:
    """A CSV (``text,label``) of ``rows`` short texts, alternating between ``topics``
    (label -> its words, space-separated), each text ``words`` seeded draws of its topic's
    words and its row number (so every text is distinct)."""
    import csv

    import numpy as np

    rng = np.random.default_rng(seed)
    labels = sorted(topics)
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["text", "label"])
        for i in range(rows):
            label = labels[i % len(labels)]
            writer.writerow([" ".join(rng.choice(topics[label].split(), size=words)) + f" {i}", label])
    return path


def tiny_table_run(table: Path, encoder: Path | str, out: Path) -> list[str]:
    """``activebayes run`` arguments for a few quick rounds on a ``text,label`` CSV with ``encoder``."""
    return ["run", "--table", str(table), "--text-column", "text", "--label-column", "label",
            "--encoder", str(encoder), "--test-size", "12", "--initial-size", "4", "--validation-size", "8",
            "--batch-size", "4", "--budget", "12", "--num-samples", "4", "--eval-samples", "4",
            "--max-epochs", "2", "--cold-start", "none", "--out", str(out), "-q"]


def tiny_png() -> bytes:
    """A valid 1x1 white PNG, built by hand (signature, IHDR, IDAT, IEND)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)  # 1x1, 8-bit RGB
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(b"\x00\xff\xff\xff"))
            + chunk(b"IEND", b""))


@pytest.fixture
def fast_figures(monkeypatch):
    """Figures are still built, but saved as a 1x1 PNG: for tests about text, not pictures."""

    def stub(figure):
        pyplot = sys.modules.get("matplotlib.pyplot")
        if pyplot is not None:
            pyplot.close(figure)
        return tiny_png()

    from activebayes.report import _figures

    monkeypatch.setattr(_figures, "to_png", stub)
