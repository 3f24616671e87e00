"""Every ```python example of the README and the docs pages runs as written.

Each page's blocks run in order in one namespace (a later block uses what an earlier
one defined), one test per block (``README.md-2``, ``docs/models.md-1``), in a
temporary working directory per page (examples write ``runs/...`` folders).

Where a page assumes names it does not define (``x_train``, a trained ``model``, a
folder ``photos/``, ...), :data:`PRELUDES` supplies them for that page, made from the
embedded digits, small so that the examples run in seconds; the docs text itself
runs unchanged, except the few replacements listed in :data:`ADAPTED` (smaller budgets
for whole loop runs, a stand-in for a person's step), each checked to still match the
text. What a block's comments show as its result is checked (:data:`SHOWN`). Blocks
that cannot run here are listed in :data:`NOT_RUN`, with the reason; a block that needs
the real MNIST files skips without them (and so do the page's later blocks). Shell
(```bash) blocks are not run. The API reference pages (``docs/api``, made by
mkdocstrings) have no examples of their own, and the adapter guides in
:data:`COVERED_ELSEWHERE` run in ``tests/adapters/test_guides.py``.
"""

from __future__ import annotations

import contextlib
import os
import re
import textwrap
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
TESTS = ROOT / "tests"
SHARED_MNIST = ROOT.parent / "shared" / "data" / "mnist"

# run (with their imports checked) by tests/adapters/test_guides.py
COVERED_ELSEWHERE = {"docs/guides/lightning.md", "docs/guides/huggingface.md", "docs/guides/scikit-learn.md"}

# a fenced block: ```python at any indentation (inside a list item or an admonition) up to
# the closing fence at the same indentation
FENCE = re.compile(r"^(?P<indent>[ \t]*)```python[^\n]*\n(?P<body>.*?)^(?P=indent)```[ \t]*$", re.MULTILINE | re.DOTALL)


def pages() -> list[str]:
    found = ["README.md"]
    for path in sorted(DOCS.rglob("*.md")):
        name = path.relative_to(ROOT).as_posix()
        if path.relative_to(DOCS).parts[0] in ("api", "_ext") or name in COVERED_ELSEWHERE:
            continue
        found.append(name)
    return found


def blocks(page: str) -> list[str]:
    text = (ROOT / page).read_text(encoding="utf-8")
    return [textwrap.dedent(match["body"]) for match in FENCE.finditer(text)]


# What a page assumes and does not define, made small from the embedded digits. Each is
# plain Python run in the page's namespace (and working directory) before its first block;
# its own helpers start with "_" (torch included), so a block that forgets an import fails.

_DIGITS = """
import torch as _torch
from activebayes.data import load_dataset as _load_dataset

_digits = _load_dataset("digits")            # 1,297 items [N, 1, 8, 8], standardised
x_train, y_train = _digits.inputs[:20], _digits.targets[:20]          # a first round's labels
x_val, y_val = _digits.inputs[100:200], _digits.targets[100:200]
x_pool, y_pool = _digits.inputs[200:400], _digits.targets[200:400]
"""

# the same digits as 28x28 images, for examples that build gal_cnn with input_shape=(1, 28, 28)
_DIGITS_28 = _DIGITS + """
def _resize(x):
    return _torch.nn.functional.interpolate(x, size=(28, 28), mode="bilinear", align_corners=False)

x_train, x_val, x_pool = _resize(x_train), _resize(x_val), _resize(x_pool)
"""

# [N, K, C] predictions and labels without a model (for the scoring and metrics pages)
_PREDICTIONS = """
import torch as _torch

_g = _torch.Generator().manual_seed(0)
log_probs_N_K_C = (3 * _torch.randn(200, 20, 10, generator=_g)).log_softmax(-1)
targets = y_true = _torch.randint(0, 10, (200,), generator=_g)
y_pred = log_probs_N_K_C.exp().mean(1).argmax(-1)
"""

# photos/: a flat folder of 60 PNG images (8x8 digits), as the labelling and big-pool pages name it
_PHOTOS = """
from pathlib import Path as _Path
from PIL import Image as _Image
from activebayes.data import load_dataset as _load_dataset

_Path("photos").mkdir()
for _i, _x in enumerate(_load_dataset("digits").inputs[:60]):
    _pixels = ((_x[0] - _x.min()) / (_x.max() - _x.min()) * 255).byte().numpy()
    _Image.fromarray(_pixels, mode="L").save(f"photos/img_{_i:03d}.png")
"""

# runs/compare: a finished two-strategy, two-seed comparison (tiny budget)
_COMPARISON = """
from activebayes.experiment import run_comparison as _run_comparison
from activebayes.records import LoopConfig as _LoopConfig

_run_comparison(_LoopConfig(dataset="digits", initial_size=20, budget=30, batch_size=10, cold_start=None,
                            eval_samples=4, num_samples=4),
                ["random", "bald"], [0, 1], "runs/compare")
"""

# runs/stop-remaining: a finished run with its stop set (stopping.md reads its stored predictions)
_STOP_RUN = """
from activebayes.experiment import run_experiment as _run_experiment
from activebayes.records import LoopConfig as _LoopConfig

_run_experiment(_LoopConfig(dataset="digits", initial_size=20, budget=40, batch_size=10, cold_start=None,
                            eval_samples=4, num_samples=4, stop_set_size=100), "runs/stop-remaining",
                progress=False, report=False)
"""

PRELUDES: dict[str, str] = {
    "README.md": _DIGITS_28 + """
y_true = y_pool                               # the pool's labels
my_own_module = _torch.nn.Sequential(_torch.nn.Flatten(), _torch.nn.Dropout(0.5), _torch.nn.Linear(64, 10))
""",
    "docs/acquisition.md": _PREDICTIONS + """
# the user's strategy of the page's last example: the version in tests/scoring
import importlib.util as _util

import sys as _sys

_spec = _util.spec_from_file_location("_strategy_from_outside", TESTS / "scoring" / "test_strategy_from_outside.py")
_outside = _sys.modules[_spec.name] = _util.module_from_spec(_spec)
_spec.loader.exec_module(_outside)
class_balanced_bald, class_balanced_plan = _outside.class_balanced_bald, _outside.class_balanced_plan
""",
    "docs/big-pools.md": _PHOTOS + """
import numpy as _np
import torch as _torch
from activebayes.models import build_model as _build_model

def make_chunk(i):                            # the user's chunk of pixels: 100,000 1x1 images
    return _np.full((100_000, 1, 1), i, dtype=_np.uint8)

model = _build_model("gal_cnn", num_classes=10, input_shape=(1, 28, 28), generator=0)
candidates_N = _torch.arange(0, 60, 2)          # the items to score
""",
    "docs/concepts/stopping.md": _STOP_RUN,
    "docs/concepts/posteriors.md": _DIGITS + """
images = _digits.inputs[:64]                    # the pool's images, for the encoder (few: it trains fast)
pool = x_pool                                   # the inputs to score
""",
    "docs/data.md": """
from activebayes.data import load_dataset as _load_dataset
from activebayes.oracles import SimulatedOracle as _SimulatedOracle
import torch as _torch

oracle = _SimulatedOracle(_load_dataset("digits"))   # answers with the digits' own labels
top_positions = _torch.tensor([0, 5, 7])             # what a strategy picked
""",
    "docs/guides/label-your-images.md": _PHOTOS + """
import csv as _csv

def _a_person_fills_in(path):                   # stands in for the person: "cat", "dog", "cat", ...
    with open(path, newline="") as file:
        rows = list(_csv.DictReader(file))
    for i, row in enumerate(rows):
        row["label"] = ("cat", "dog")[i % 2]
    with open(path, "w", newline="") as file:
        writer = _csv.DictWriter(file, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
""",
    "docs/guides/text-and-tables.md": """
import csv as _csv
import random as _random

_words = {"billing": "invoice refund charge payment card", "network": "wifi router vpn outage latency",
          "accounts": "password login reset locked username"}
_rng = _random.Random(0)
with open("tickets.csv", "w", newline="") as _file:   # 900 tickets, three teams
    _writer = _csv.writer(_file)
    _writer.writerow(["ticket_id", "body", "team"])
    for _i in range(900):
        _team = sorted(_words)[_i % 3]
        _body = " ".join(_rng.choices(_words[_team].split() + "please help today thanks issue".split(), k=8))
        _writer.writerow([f"T-{_i:04d}", _body, _team])
""",
    "docs/labelling.md": _PHOTOS + """
item_id = 1                                     # an item's id in the store (photos/img_000.png's)
""",
    "docs/metrics.md": _PREDICTIONS,
    "docs/models.md": _DIGITS_28,
    "docs/report.md": _COMPARISON,
    "docs/representation.md": _DIGITS + """
dataset = _digits.subset(range(300))           # the training split (few images: it trains fast)
pool_inputs = x_pool
""",
    "docs/guides/your-own-model.md": _DIGITS,
}

# Blocks that run with a smaller workload than the page shows, or with a person's step
# done by a stand-in (the text is otherwise run as written):
# (page, block) -> [(written, run instead)], each of which must occur in the block.
ADAPTED: dict[tuple[str, int], list[tuple[str, str]]] = {
    ("README.md", 2): [("budget=150", "budget=40")],
    ("docs/acquisition.md", 2): [('strategy="class_balanced_bald")', 'strategy="class_balanced_bald", budget=30)')],
    ("docs/guides/compare-strategies.md", 1): [("budget=150", "budget=30"), ("[0, 1, 2]", "[0]")],
    ("docs/guides/your-own-model.md", 2): [("budget=150", "budget=30")],
    ("docs/guides/your-own-model.md", 4): [("budget=300", "budget=40")],
    ("docs/guides/your-own-model.md", 5): [('model="my_net")', 'model="my_net", budget=30)')],
    ("docs/guides/text-and-tables.md", 1): [("budget=300", "budget=40")],
    # a person's step, done by the prelude's stand-in
    ("docs/guides/label-your-images.md", 1): [("# ... a person fills in query.path ...",
                                               "_a_person_fills_in(query.path)")],
}


# blocks that are not run, with the reason: (page, block number from 1) -> reason
NOT_RUN: dict[tuple[str, int], str] = {
    ("docs/models.md", 2): "a signature (reference), not an example",
    ("docs/models.md", 3): "a signature (reference), not an example",
    ("docs/big-pools.md", 3): "starts a local Ray cluster (about a minute); tests/scoring/test_distributed.py "
                              "runs score_pool on a RayExecutor",
    ("docs/big-pools.md", 4): "connects to a running Ray cluster (address='auto')",
    ("docs/labelling.md", 1): "talks to a running labelling server at 127.0.0.1:8765 (tests/app drive the same API)",
}

# What a page shows as a block's result (in its comments), checked after the block:
# (page, block) -> expressions that must be true in the page's namespace and folder.
SHOWN: dict[tuple[str, int], list[str]] = {
    ("README.md", 1): ["log_probs_N_K_C.shape == (200, 100, 10)", "len(batch.indices) == len(batch.scores) == 10",
                       "scores_N.shape == (200,)"],
    ("README.md", 2): ["result.learning_curve[0][:2] == [20, 30]"],
    ("docs/acquisition.md", 1): ["batch.strategy == 'batchbald' and len(batch.indices) == 10",
                                 "scores_N.shape == (200,) and scores_N.dtype == torch.float64"],
    ("docs/data.md", 1): ["available_datasets() == ('breast_cancer', 'digits', 'fashion_mnist', 'iris', 'kmnist', "
                          "'memmap', 'mnist', 'mnist_pairs', 'rand_hie', 'repeated_mnist', 'wine', 'wordnet_nouns')",
                          "len(train) == 1297 and tuple(train.inputs.shape[1:]) == (1, 8, 8)", "len(test) == 500"],
    ("docs/data.md", 2): ["len(inputs) == 20 and set(picked.tolist()) <= set(pool.labelled_indices.tolist())"],
    ("docs/models.md", 1): ["log_probs_N_K_C.shape == (200, 100, 10)"],
    ("docs/guides/your-own-model.md", 2): ["result.learning_curve[0][:2] == [20, 30]"],
    ("docs/guides/your-own-model.md", 6): ["log_probs_N_E_C.shape == (200, 5, 10)"],
    ("docs/guides/label-your-images.md", 1): ["Path('cats-dogs/exports/labels.csv').is_file()"],
    ("docs/report.md", 1): ["Path('runs/compare/report.html').is_file()"],
    ("docs/concepts/stopping.md", 2): ["predicted_S.shape == (100,) and stop_set_N.shape == (100,)",
                                       "record.n_labelled == 40"],
    ("docs/guides/text-and-tables.md", 3): ["Path('tickets-labels.csv').read_text().count(',billing,') == 1"],
    ("docs/representation.md", 1): ["features_N_D.shape == (200, 128)"],
}

# blocks that need the real MNIST files next to the project (../shared/data/mnist)
NEEDS_MNIST = {("docs/data.md", 1)}


def source(page: str, number: int) -> str:
    """Block ``number`` (from 1) of ``page``, as it runs (with :data:`ADAPTED`'s replacements)."""
    text = blocks(page)[number - 1]
    for written, instead in ADAPTED.get((page, number), []):
        assert written in text, f"{page} block {number} no longer contains {written!r}: update ADAPTED"
        text = text.replace(written, instead)
    return text


def _registries() -> dict:
    from activebayes.acquisition.strategies import REGISTRY as strategies
    from activebayes.data.datasets import DATASETS
    from activebayes.models.networks import MODELS

    return {"strategy": strategies, "model": MODELS, "dataset": DATASETS}


def _restore_registries(names: dict[str, set[str]]) -> None:
    """Unregister what examples registered (register_strategy / register_model / ...)."""
    for kind, registry in _registries().items():
        for name in set(registry.names()) - names[kind]:
            registry.unregister(name)


@dataclass
class PageRun:
    """The namespace and working directory a page's blocks share, and how far they got."""

    workdir: Path
    namespace: dict = field(default_factory=dict)
    done: int = 0  # blocks run so far
    stopped: tuple[int, str] | None = None  # (block, "failed" / "skipped: reason")


_RUNS: dict[str, PageRun] = {}


@contextlib.contextmanager
def _inside(workdir: Path):
    """In the page's folder, with HOME and the cache there (examples write ~/.cache/...)."""
    previous = os.getcwd()
    saved = {key: os.environ.get(key) for key in ("HOME", "ACTIVEBAYES_CACHE_DIR")}
    os.chdir(workdir)
    os.environ["HOME"] = str(workdir.parent / "home")
    os.environ["ACTIVEBAYES_CACHE_DIR"] = str(workdir.parent.parent / "cache")  # shared by the pages
    try:
        yield
    finally:
        os.chdir(previous)
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _exec(page: str, text: str, label: str, run: PageRun) -> None:
    code = compile(text, f"{page} {label}", "exec")
    with _inside(run.workdir):
        exec(code, run.namespace)


def _why_not(page: str, number: int) -> str | None:
    if (page, number) in NOT_RUN:
        return NOT_RUN[page, number]
    if (page, number) in NEEDS_MNIST and not (SHARED_MNIST / "t10k-labels-idx1-ubyte.gz").exists():
        return f"needs the real MNIST files at {SHARED_MNIST}"
    return None


def _new_run(page: str, tmp_path_factory) -> PageRun:
    folder = tmp_path_factory.mktemp(re.sub(r"\W", "_", page))
    workdir = folder / "work"
    workdir.mkdir()
    (folder / "home").mkdir()
    if SHARED_MNIST.is_dir():  # the docs name it ../shared/data/mnist from the project root
        (folder / "shared" / "data").mkdir(parents=True)
        (folder / "shared" / "data" / "mnist").symlink_to(SHARED_MNIST, target_is_directory=True)
    run = PageRun(workdir, {"__name__": "__main__", "TESTS": TESTS})
    _exec(page, PRELUDES.get(page, ""), "prelude", run)
    run.namespace.pop("TESTS")
    return run


def _page_run(page: str, upto: int, tmp_path_factory, registered: dict[str, set[str]]) -> PageRun:
    """The page's run with blocks 1 .. upto - 1 done (re-run from scratch if already past them)."""
    run = _RUNS.get(page)
    if run is None or run.done >= upto:
        _restore_registries(registered)
        run = _RUNS[page] = _new_run(page, tmp_path_factory)
    while run.done < upto - 1 and run.stopped is None:
        number = run.done + 1
        why_not = _why_not(page, number)
        if why_not is None:
            try:
                _exec(page, source(page, number), f"block {number}", run)
            except Exception:
                run.stopped = (number, "failed")
        elif (page, number) in NEEDS_MNIST:
            run.stopped = (number, f"skipped: {why_not}")
        run.done = number
    if run.stopped is not None:
        number, what = run.stopped
        message = f"{page}: block {upto} runs after block {number}, which {what}"
        if what == "failed":
            pytest.fail(message)
        pytest.skip(message)
    return run


CASES = [
    pytest.param(page, number, id=f"{page}-{number}", marks=pytest.mark.xdist_group(f"examples-{page}"))
    for page in pages()
    for number in range(1, len(blocks(page)) + 1)
]


@pytest.fixture(scope="module")
def registered():
    """The registries' names before any example ran; restored at the end."""
    names = {kind: set(registry.names()) for kind, registry in _registries().items()}
    yield names
    _restore_registries(names)
    _RUNS.clear()


def test_pages_are_found():
    assert "docs/data.md" in pages() and "docs/guides/compare-strategies.md" in pages()
    assert not any(page.startswith("docs/api/") for page in pages())
    assert len(blocks("README.md")) >= 3
    guides = (TESTS / "adapters" / "test_guides.py").read_text(encoding="utf-8")
    for page in COVERED_ELSEWHERE:  # really run there
        assert f'"{Path(page).name}"' in guides
    for page, number in [*NOT_RUN, *ADAPTED, *NEEDS_MNIST, *SHOWN]:  # the lists name real blocks
        assert page in pages() and 1 <= number <= len(blocks(page)), (page, number)
    for page in PRELUDES:
        assert page in pages(), page


@pytest.mark.parametrize(("page", "number"), CASES)
def test_example_runs(page, number, tmp_path_factory, registered):
    why_not = _why_not(page, number)
    if why_not is not None:
        pytest.skip(why_not)
    run = _page_run(page, number, tmp_path_factory, registered)
    tic = time.perf_counter()
    try:
        _exec(page, source(page, number), f"block {number}", run)
    except BaseException:
        run.stopped = (number, "failed")
        raise
    finally:
        run.done = number
    for claim in SHOWN.get((page, number), []):
        with _inside(run.workdir):
            assert eval(claim, {"Path": Path, **run.namespace}), f"{page} block {number}: not {claim}"
    print(f"{page} block {number}: {time.perf_counter() - tic:.1f} s")
