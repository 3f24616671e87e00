r"""WordNet noun glosses classified into their lexicographer categories: a real, offline text task.

Every noun synset in WordNet 3.0's ``data.noun`` has a gloss (its definition, often
with examples) and a lexicographer file number that puts it in one of 26 categories
(``noun.animal``, ``noun.artifact``, ``noun.person``, ...). The task: predict the
category from the gloss. 82,115 synsets; the categories are unbalanced (``noun.Tops``
has 51 synsets, ``noun.artifact`` over 11,000).

:func:`read_wordnet_nouns` reads and checks the standard database files in a folder
(Debian / Ubuntu: ``apt-get install wordnet-base`` puts them in ``/usr/share/wordnet``;
the Princeton distribution in ``WordNet-3.0/dict``). Each ``data.noun`` line is
``offset lex_filenum ss_type w_cnt word lex_id ... p_cnt ptr... | gloss``, and a line's
``offset`` is its byte offset in the file: every line is checked against that
invariant, so a truncated, edited or re-encoded file is detected. The number to name
map comes from the folder's ``lexnames`` file when present, else WordNet 3.0's
standard table (:data:`LEXNAMES`; Debian's package does not ship ``lexnames``, the
WordNet library has the same table compiled in).

:func:`wordnet_nouns` is the ``"wordnet_nouns"`` entry of
:func:`~activebayes.data.load_dataset`: a fixed split (seed :data:`WORDNET_SPLIT_SEED`,
:data:`WORDNET_TEST_SIZE` test synsets), glosses encoded by TF-IDF + a 256-dimensional
SVD fitted on the training glosses only, features centred and scaled with the training
split's statistics (one common scale, :func:`~activebayes.data.text.embedding_scale`). Item ids are the synset offsets (``"n02084071"``).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch

from activebayes.errors import MissingFileError

from ._core import DataError
from .dataset import ArrayDataset

if TYPE_CHECKING:
    from .text import TextEncoder

__all__ = ["LEXNAMES", "WordNetNouns", "read_wordnet_nouns", "find_wordnet_dir", "wordnet_nouns", "wordnet_split",
           "wordnet_contents",
           "WORDNET_SPLIT_SEED", "WORDNET_TEST_SIZE", "WORDNET_DIRS"]

#: WordNet 3.0's lexicographer files, by number (lexnames(5WN)).
LEXNAMES: tuple[str, ...] = (
    "adj.all", "adj.pert", "adv.all", "noun.Tops", "noun.act", "noun.animal", "noun.artifact", "noun.attribute",
    "noun.body", "noun.cognition", "noun.communication", "noun.event", "noun.feeling", "noun.food", "noun.group",
    "noun.location", "noun.motive", "noun.object", "noun.person", "noun.phenomenon", "noun.plant",
    "noun.possession", "noun.process", "noun.quantity", "noun.relation", "noun.shape", "noun.state",
    "noun.substance", "noun.time", "verb.body", "verb.change", "verb.cognition", "verb.communication",
    "verb.competition", "verb.consumption", "verb.contact", "verb.creation", "verb.emotion", "verb.motion",
    "verb.perception", "verb.possession", "verb.social", "verb.stative", "verb.weather", "adj.ppl",
)
#: Folders searched when no folder is given (after ``$WNSEARCHDIR``).
WORDNET_DIRS = ("/usr/share/wordnet", "/usr/local/WordNet-3.0/dict", "/usr/share/wordnet/dict")
WORDNET_SPLIT_SEED = 26
WORDNET_TEST_SIZE = 10_000


@dataclass(frozen=True)
class WordNetNouns:
    """The noun synsets of a WordNet database, in file order.

    Attributes:
        offsets: each synset's byte offset (its id in WordNet), ``[N]``.
        lexfiles: each synset's lexicographer file number, ``[N]``.
        lemmas: each synset's words (underscores as spaces).
        glosses: each synset's gloss.
        lexnames: lexicographer file names by number.
    """

    offsets: np.ndarray
    lexfiles: np.ndarray
    lemmas: tuple[tuple[str, ...], ...]
    glosses: tuple[str, ...]
    lexnames: tuple[str, ...]

    @property
    def categories(self) -> tuple[str, ...]:
        """The noun categories present, sorted by file number (the class names)."""
        return tuple(self.lexnames[i] for i in sorted(set(self.lexfiles.tolist())))

    @property
    def item_ids(self) -> tuple[str, ...]:
        return tuple(f"n{o:08d}" for o in self.offsets.tolist())


def find_wordnet_dir(folder: str | os.PathLike[str] | None = None) -> Path:
    """The folder holding ``data.noun``: ``folder`` (or ``folder/dict``, ``folder/wordnet``), else
    ``$WNSEARCHDIR``, else the first of :data:`WORDNET_DIRS` that has it."""
    if folder is not None:
        root = Path(folder).expanduser()
        candidates = [root, root / "dict", root / "wordnet"]
    else:
        env = os.environ.get("WNSEARCHDIR")
        candidates = ([Path(env)] if env else []) + [Path(d) for d in WORDNET_DIRS]
    for candidate in candidates:
        if (candidate / "data.noun").is_file():
            return candidate
    where = ", ".join(str(c) for c in candidates)
    raise MissingFileError(f"WordNet's data.noun not found (looked in {where}); install the Debian package "
                           "wordnet-base or pass data_dir=<folder holding data.noun>")


def _read_lexnames(path: Path) -> tuple[str, ...]:
    names: dict[int, str] = {}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        fields = line.split()
        if len(fields) != 3 or not fields[0].isdigit() or not fields[2].isdigit():
            raise DataError(f"{path}: line {number} must be 'NUMBER NAME CATEGORY', got {line!r}")
        names[int(fields[0])] = fields[1]
    if sorted(names) != list(range(len(names))):
        raise DataError(f"{path}: file numbers must run 0 .. {len(names) - 1} without gaps")
    return tuple(names[i] for i in range(len(names)))


def read_wordnet_nouns(folder: str | os.PathLike[str] | None = None) -> WordNetNouns:
    """Read and check the noun synsets of the WordNet database in ``folder`` (see the module docstring).

    Raises :class:`~activebayes.errors.MissingFileError` when ``data.noun`` is missing and
    :class:`DataError` naming the file and line for a corrupt one (bad fields, an
    offset that is not the line's byte offset, a lexicographer number that is not a noun file).
    """
    root = find_wordnet_dir(folder)
    path = root / "data.noun"
    lexnames = _read_lexnames(root / "lexnames") if (root / "lexnames").is_file() else LEXNAMES
    raw = path.read_bytes()
    offsets, lexfiles, lemmas, glosses = [], [], [], []
    position = 0
    for number, line_bytes in enumerate(raw.split(b"\n"), start=1):
        start = position
        position += len(line_bytes) + 1
        if not line_bytes.strip() or line_bytes.startswith(b"  "):  # the licence header lines
            continue
        where = f"{path}: line {number}"
        try:
            line = line_bytes.decode("utf-8")
        except UnicodeDecodeError:
            raise DataError(f"{where} is not valid UTF-8: the file is corrupt") from None
        head, bar, gloss = line.partition(" | ")
        fields = head.split()
        try:
            offset, lexfile, kind, w_cnt = int(fields[0]), int(fields[1]), fields[2], int(fields[3], 16)
            words = fields[4 : 4 + 2 * w_cnt : 2]
            if not bar or kind != "n" or len(words) != w_cnt or w_cnt < 1:
                raise ValueError
        except (ValueError, IndexError):
            raise DataError(f"{where} is not a WordNet noun synset line "
                            "('offset lex_filenum n w_cnt word lex_id ... | gloss')") from None
        if offset != start:
            raise DataError(f"{where}: synset offset {offset:08d} is not the line's byte offset {start:08d}: "
                            "the file was truncated, edited or re-encoded")
        if not 0 <= lexfile < len(lexnames) or not lexnames[lexfile].startswith("noun."):
            raise DataError(f"{where}: lexicographer file {lexfile:02d} is not a noun file")
        gloss = gloss.strip()
        if not gloss:
            raise DataError(f"{where}: synset {offset:08d} has an empty gloss")
        offsets.append(offset)
        lexfiles.append(lexfile)
        lemmas.append(tuple(w.replace("_", " ") for w in words))
        glosses.append(gloss)
    if not offsets:
        raise DataError(f"{path}: no synset found: not a WordNet data.noun file")
    return WordNetNouns(np.array(offsets, dtype=np.int64), np.array(lexfiles, dtype=np.int64), tuple(lemmas),
                        tuple(glosses), lexnames)


def wordnet_split(n_items: int, *, test_size: int | None = None,
                  seed: int = WORDNET_SPLIT_SEED) -> tuple[np.ndarray, np.ndarray]:
    """Sorted ``(train, test)`` row indices: the first ``test_size`` (default :data:`WORDNET_TEST_SIZE`)
    of a seeded permutation are test."""
    test_size = WORDNET_TEST_SIZE if test_size is None else test_size
    order = np.random.default_rng(seed).permutation(n_items)
    return np.sort(order[test_size:]), np.sort(order[:test_size])


def wordnet_nouns(
    split: str = "train",
    *,
    data_dir: str | os.PathLike[str] | None = None,
    dim: int = 256,
    cache_dir: str | os.PathLike[str] | None = None,
    encoder: str | os.PathLike[str] | TextEncoder | None = None,
    **_: object,
) -> ArrayDataset:
    """The ``"wordnet_nouns"`` dataset (see the module docstring): float32 features ``[N, D]``.

    ``encoder``: ``None`` / ``"tfidf"``, TF-IDF + SVD to ``dim`` dimensions fitted on the
    training glosses; otherwise any :func:`~activebayes.data.text.get_encoder` argument
    (a word-vector file such as GloVe, a local model folder) applied to every gloss.
    ``cache_dir``: where the encoded glosses are cached (default
    ``default_data_dir()/embeddings``; skipped when not writable).
    """
    from .datasets import default_data_dir
    from .text import TfidfEncoder, embedding_scale, encode_texts, get_encoder

    nouns = read_wordnet_nouns(data_dir)
    train, test = wordnet_split(len(nouns.glosses))
    categories = nouns.categories
    label_of = {nouns.lexnames.index(name): c for c, name in enumerate(categories)}
    glosses = list(nouns.glosses)
    enc = TfidfEncoder(dim=dim, seed=WORDNET_SPLIT_SEED) if encoder in (None, "tfidf") else get_encoder(encoder)
    # an encoder that learns from the texts (TF-IDF) learns from the training glosses alone
    fit_texts = [glosses[i] for i in train.tolist()] if isinstance(enc, TfidfEncoder) else None
    features = encode_texts(glosses, enc, fit_texts=fit_texts,
                            cache_dir=cache_dir if cache_dir is not None else default_data_dir() / "embeddings")
    features = np.asarray(features, dtype=np.float32)
    mean = features[train].mean(0, dtype=np.float64)
    std = embedding_scale(features[train].std(0, dtype=np.float64))
    rows = train if split == "train" else test
    inputs = ((features[rows] - mean) / std).astype(np.float32)
    targets = np.array([label_of[f] for f in nouns.lexfiles[rows].tolist()], dtype=np.int64)
    return ArrayDataset(inputs=torch.from_numpy(inputs), targets=torch.from_numpy(targets), classes=categories,
                        name="wordnet_nouns")


def wordnet_contents(split: str = "train", *, data_dir: str | os.PathLike[str] | None = None,
                     **_: object) -> list[dict[str, object]]:
    """What a person sees of each row of :func:`wordnet_nouns` ``split``, in its order: the
    gloss as the text (the model reads only it) and the synset's words."""
    nouns = read_wordnet_nouns(data_dir)
    train, test = wordnet_split(len(nouns.glosses))
    return [{"kind": "text", "text": nouns.glosses[i], "fields": [["words", ", ".join(nouns.lemmas[i])]]}
            for i in (train if split == "train" else test).tolist()]


def wordnet_item_ids(data_dir: str | os.PathLike[str] | None = None, split: str = "train") -> Sequence[str]:
    """The synset ids (``"n%08d"``) of the rows of :func:`wordnet_nouns` ``split``, in order."""
    nouns = read_wordnet_nouns(data_dir)
    train, test = wordnet_split(len(nouns.glosses))
    ids = nouns.item_ids
    return tuple(ids[i] for i in (train if split == "train" else test).tolist())
