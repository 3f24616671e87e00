"""--representation self-supervised: the encoder is learnt once (cached) and every round starts from it."""

from __future__ import annotations

import pytest
import torch

from activebayes.cli import main
from activebayes.loop import ActiveLearningLoop, LoopConfig
from activebayes.models import EncoderClassifier, RepresentationConfig, train_or_load_representation
from tests.conftest import FAST_LOOP

TINY = {"epochs": 1, "batch_size": 64, "width": 4, "feature_dim": 8, "projection_dim": 8}


@pytest.fixture()
def cache(monkeypatch, tmp_path):
    monkeypatch.setenv("ACTIVEBAYES_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache" / "representations"


def test_rounds_start_from_the_cached_encoder(cache):
    config = LoopConfig(strategy="typicality", representation="self-supervised", representation_options=TINY,
                        **{**FAST_LOOP, "budget": 30})
    loop = ActiveLearningLoop(config)
    assert len(list(cache.glob("*.pt"))) == 1  # trained once, cached
    # the same encoder as training it directly on the training split's images
    direct = train_or_load_representation(loop.dataset.inputs, RepresentationConfig.from_dict(TINY), seed=0,
                                           cache_dir=None)
    for a, b in zip(loop.representation.encoder.state_dict().values(), direct.encoder.state_dict().values(),
                    strict=True):
        assert torch.equal(a, b)
    result = loop.run(progress=False)
    assert isinstance(loop.model, EncoderClassifier)
    again = ActiveLearningLoop(config).run(progress=False)  # loads the cache: same picks
    assert [r.acquired for r in again.rounds] == [r.acquired for r in result.rounds]


def test_representation_needs_its_own_model(tmp_path):
    with pytest.raises(ValueError, match="model must be 'auto' or 'encoder_head'"):
        LoopConfig(representation="self-supervised", model="mlp")


def test_cli_flag(cache, tmp_path, capsys):
    code = main(["run", "--representation", "self-supervised", "--budget", "30", "--validation-size", "50",
                 "--max-epochs", "2", "--num-samples", "4", "--eval-samples", "4", "--quiet",
                 "--config", str(_toml(tmp_path)), "--out", str(tmp_path / "run")])
    assert code == 0, capsys.readouterr().err
    assert '"representation": "self-supervised"' in (tmp_path / "run" / "config.json").read_text()


def _toml(tmp_path):
    path = tmp_path / "config.toml"
    path.write_text("[representation_options]\n" + "".join(f"{k} = {v}\n" for k, v in TINY.items()))
    return path


@pytest.mark.parametrize("posterior", ["mc_dropout", "ensemble", "laplace"])
def test_each_item_is_encoded_once_per_run_not_per_round(cache, posterior):
    """Every round's head shares one frozen encoder and its feature cache: after the first
    round nothing is encoded again (the pool, the validation and stop sets included)."""
    config = LoopConfig(representation="self-supervised", representation_options=TINY, posterior=posterior,
                        **{**FAST_LOOP, "budget": 40})
    loop = ActiveLearningLoop(config)
    encoded = []
    loop.representation.encoder.register_forward_hook(lambda module, args, out: encoded.append(out.shape[0]))
    loop.step()
    assert sum(encoded) > 0  # the hook sees the encoder the heads run
    encoded.clear()
    while not loop.finished:
        loop.step()
    assert sum(encoded) == 0, f"later rounds encoded {sum(encoded)} items again"
