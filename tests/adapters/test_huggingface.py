"""HuggingFacePosterior against the real transformers 5.x, with a tiny random BERT (nothing downloaded)."""

from __future__ import annotations

import pytest
import torch

transformers = pytest.importorskip("transformers")

from adapters_toy import determinism_settings, next_draws, seed_globals  # noqa: E402

from activebayes.adapters import HuggingFaceClassifier, HuggingFacePosterior  # noqa: E402
from activebayes.data import from_arrays  # noqa: E402
from activebayes.errors import InvalidArgumentError, InvalidTypeError  # noqa: E402
from activebayes.loop import ActiveLearningLoop, LoopConfig  # noqa: E402
from activebayes.models import mc_dropout, mc_sampling, resample_masks  # noqa: E402

VOCAB, LENGTH = 40, 10


def tiny_bert(seed: int = 0, **overrides) -> torch.nn.Module:
    config = transformers.BertConfig(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                     intermediate_size=64, max_position_embeddings=16, num_labels=3, pad_token_id=0,
                                     **overrides)
    torch.manual_seed(seed)
    return transformers.BertForSequenceClassification(config)


def token_ids(n: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Token ids [n, L] with padding (0) after a random length, and a learnable label."""
    g = torch.Generator().manual_seed(seed)
    ids_N_L = torch.randint(1, VOCAB, (n, LENGTH), generator=g)
    lengths_N = torch.randint(3, LENGTH + 1, (n,), generator=g)
    ids_N_L[torch.arange(LENGTH)[None] >= lengths_N[:, None]] = 0
    y_N = (ids_N_L[:, 0] % 3).long()  # the first token decides the class
    return ids_N_L, y_N


def test_samples_are_consistent_across_batches_and_orders_and_honour_k_and_batch_size():
    posterior = HuggingFacePosterior(tiny_bert(), eval_batch_size=4)
    x_N_L, _ = token_ids(24)
    seen_batches = []
    hook = posterior.model.register_forward_pre_hook(lambda m, a, kw: seen_batches.append(len(kw["input_ids"])),
                                                     with_kwargs=True)
    log_probs_N_K_C = posterior.log_probs(x_N_L, num_samples=5, generator=2)
    hook.remove()
    assert log_probs_N_K_C.shape == (24, 5, 3)
    assert max(seen_batches) <= 4  # the eval batch size, whatever N and K
    order = torch.randperm(24, generator=torch.Generator().manual_seed(0))
    shuffled = posterior.log_probs(x_N_L[order], num_samples=5, generator=2, batch_size=7)
    torch.testing.assert_close(shuffled, log_probs_N_K_C[order], rtol=0, atol=1e-5)
    # an independent reference: sample k = one forward of all items with masks k (sequential MC)
    module = posterior.module
    resample_masks(module, generator=2)
    module.eval()
    for k in (0, 3):
        with torch.no_grad(), mc_sampling(module, [k], expand=False):
            logits_N_C = posterior.model(input_ids=x_N_L, attention_mask=(x_N_L != 0).long()).logits
        torch.testing.assert_close(log_probs_N_K_C[:, k], logits_N_C.log_softmax(-1), rtol=0, atol=1e-5)
    # K samples are K different functions; the deterministic model is none of them
    assert not torch.allclose(log_probs_N_K_C[:, 0], log_probs_N_K_C[:, 1])
    with torch.no_grad():
        mean_N_C = posterior.model(input_ids=x_N_L, attention_mask=(x_N_L != 0).long()).logits.log_softmax(-1)
    assert not torch.allclose(mean_N_C, log_probs_N_K_C[:, 0])
    # evaluation uses the K samples too
    metrics = posterior.evaluate(x_N_L, torch.zeros(24, dtype=torch.long), num_samples=5, generator=2)
    expected = float((log_probs_N_K_C.exp().mean(1).argmax(1) == 0).float().mean())
    assert metrics["accuracy"] == pytest.approx(expected)


def test_trainer_fit_is_seeded_and_learns(tmp_path):
    x_N_L, y_N = token_ids(48)
    args = transformers.TrainingArguments(
        output_dir=str(tmp_path), num_train_epochs=8, per_device_train_batch_size=8, per_device_eval_batch_size=16,
        learning_rate=5e-3, report_to="none", use_cpu=True, save_strategy="no", logging_strategy="no",
        disable_tqdm=True)
    weights = []
    for _ in range(2):
        posterior = HuggingFacePosterior(tiny_bert(), training_args=args)
        summary = posterior.fit((x_N_L, y_N), generator=torch.Generator().manual_seed(3))
        weights.append(posterior.model.classifier.weight.detach().clone())
    assert posterior.eval_batch_size == 16
    assert summary["global_step"] == 8 * 6
    torch.testing.assert_close(weights[0], weights[1], rtol=0, atol=0)
    accuracy = (posterior.log_probs(x_N_L, num_samples=4, generator=0).exp().mean(1).argmax(1) == y_N).float().mean()
    assert accuracy > 0.6  # chance is 1/3


class _StopAtFirstStep(transformers.TrainerCallback):
    def on_step_end(self, args, state, control, **kwargs):
        raise RuntimeError("stopped by the test")


@pytest.mark.parametrize("full_determinism", [False, True])
def test_trainer_fit_leaves_the_global_rngs_and_settings_as_they_were(tmp_path, keep_global_state, full_determinism):
    """The Trainer seeds random / NumPy / torch (set_seed) and, with full_determinism, sets torch's flags
    and CUDA env variables: fit restores them all, on an error too; its weights do not depend on them."""
    x_N_L, y_N = token_ids(24)
    args = transformers.TrainingArguments(
        output_dir=str(tmp_path), num_train_epochs=1, per_device_train_batch_size=8, report_to="none", use_cpu=True,
        save_strategy="no", logging_strategy="no", disable_tqdm=True, full_determinism=full_determinism)
    posteriors = [HuggingFacePosterior(tiny_bert(), training_args=args) for _ in range(2)]
    failing = HuggingFacePosterior(tiny_bert(), training_args=args, trainer_kwargs={"callbacks": [_StopAtFirstStep()]})
    seed_globals(11)
    expected, settings = next_draws(), determinism_settings()
    seed_globals(11)
    posteriors[0].fit((x_N_L, y_N), generator=torch.Generator().manual_seed(3))
    assert next_draws() == expected
    assert determinism_settings() == settings
    seed_globals(11)
    with pytest.raises(RuntimeError, match="stopped by the test"):
        failing.fit((x_N_L, y_N), generator=torch.Generator().manual_seed(3))
    assert next_draws() == expected
    assert determinism_settings() == settings
    seed_globals(12)  # other global streams: the same fit
    posteriors[1].fit((x_N_L, y_N), generator=torch.Generator().manual_seed(3))
    first, second = (p.log_probs(x_N_L, num_samples=3, generator=0) for p in posteriors)
    torch.testing.assert_close(first, second, rtol=0, atol=0)


def test_loop_through_the_adapter_picks_what_the_native_module_picks():
    """The same BERT, trained by activebayes' fit either way: the loop given the posterior and the
    loop given the bare nn.Module (HuggingFaceClassifier) pick the same items every round."""
    x_N_L, y_N = token_ids(120, seed=1)
    dataset = from_arrays(x_N_L.float().numpy(), y_N.numpy(), name="tokens")
    fit_options = {"max_epochs": 2, "min_samples_per_epoch": 64, "batch_size": 16, "lr": 1e-3}
    config = LoopConfig(strategy="bald", initial_size=12, validation_size=16, batch_size=6, budget=24,
                        num_samples=3, eval_samples=2, predict_batch_size=16, evaluate_test=False,
                        cold_start=None, seed=1, fit_options=fit_options)
    native = ActiveLearningLoop(
        config, dataset=dataset, model_factory=lambda g: HuggingFaceClassifier(mc_dropout(tiny_bert(), inplace=True)))
    adapted = ActiveLearningLoop(
        config, dataset=dataset, model_factory=lambda g: HuggingFacePosterior(tiny_bert(), fit_options=fit_options))
    native_result, adapted_result = native.run(progress=False), adapted.run(progress=False)
    assert isinstance(adapted.posterior, HuggingFacePosterior)
    assert len(adapted_result.rounds) == 3
    assert [r.acquired for r in adapted_result.rounds] == [r.acquired for r in native_result.rounds]
    assert adapted_result.rounds[0].fit["epochs_run"] >= 1


def test_dropout_zero_and_wrong_types_give_one_line_errors():
    with pytest.raises(InvalidArgumentError, match=r"hidden_dropout_prob=0.0\): set its config's hidden_dropout_prob") as e:
        HuggingFacePosterior(tiny_bert(hidden_dropout_prob=0.0))
    assert "\n" not in str(e.value)
    with pytest.raises(InvalidTypeError, match="model must be a transformers.PreTrainedModel"):
        HuggingFacePosterior(torch.nn.Linear(2, 2))
    with pytest.raises(InvalidArgumentError, match="eval_batch_size must be >= 1"):
        HuggingFacePosterior(tiny_bert(), eval_batch_size=0)
    with pytest.raises(InvalidArgumentError, match="num_samples is required"):
        HuggingFacePosterior(tiny_bert()).log_probs(token_ids(2)[0], num_samples=None)


def test_token_ids_outside_the_vocabulary_give_one_line_errors(tmp_path):
    posterior = HuggingFacePosterior(tiny_bert())
    x_N_L, y_N = token_ids(6)
    for bad_N_L in (x_N_L + VOCAB, x_N_L - VOCAB):
        with pytest.raises(InvalidArgumentError, match=r"input_ids must be token ids in \[0, 40\) \(the vocab_size\), "
                                                       r"got ids from -?\d+ to -?\d+$") as error:
            posterior.log_probs(bad_N_L, num_samples=2, generator=0)
        assert "\n" not in str(error.value)
    with pytest.raises(InvalidArgumentError, match=r"input_ids must be token ids \(whole numbers\), got NaN"):
        posterior.log_probs(torch.full((3, LENGTH), float("nan")), num_samples=2)
    with pytest.raises(InvalidArgumentError, match=r"input_ids must be token ids in \[0, 40\)"):
        posterior.fit((x_N_L + VOCAB, y_N), generator=0)  # activebayes' fit
    args = transformers.TrainingArguments(output_dir=str(tmp_path), report_to="none", use_cpu=True,
                                          save_strategy="no", disable_tqdm=True)
    with pytest.raises(InvalidArgumentError, match=r"train input_ids must be token ids in \[0, 40\)"):
        HuggingFacePosterior(tiny_bert(), training_args=args).fit((x_N_L + VOCAB, y_N), generator=0)
    with pytest.raises(InvalidArgumentError, match=r"validation input_ids must be token ids in \[0, 40\)"):
        HuggingFacePosterior(tiny_bert(), training_args=args).fit((x_N_L, y_N), validation=(x_N_L + VOCAB, y_N))


def test_sequences_longer_than_the_model_reads_are_named():
    posterior = HuggingFacePosterior(tiny_bert())  # max_position_embeddings=16
    long_N_L = torch.randint(1, VOCAB, (4, 20), generator=torch.Generator().manual_seed(0))
    with pytest.raises(InvalidArgumentError, match=r"input_ids hold sequences of 20 tokens, but the model reads at "
                                                   r"most 16 \(its max_position_embeddings\): truncate them to 16$"):
        posterior.log_probs(long_N_L, num_samples=2, generator=0)
    with pytest.raises(InvalidArgumentError, match=r"input_ids hold sequences of 20 tokens"):
        posterior.fit((long_N_L, torch.arange(4) % 3), generator=0)
    assert posterior.log_probs(long_N_L[:, :16], num_samples=2, generator=0).shape == (4, 2, 3)


def test_a_model_returning_tuples_gives_the_same_samples():
    x_N_L, _ = token_ids(12)
    expected = HuggingFacePosterior(tiny_bert()).log_probs(x_N_L, num_samples=3, generator=1)
    tuples = HuggingFacePosterior(tiny_bert(return_dict=False))
    torch.testing.assert_close(tuples.log_probs(x_N_L, num_samples=3, generator=1), expected, rtol=0, atol=1e-6)
    assert tuples.features(x_N_L).shape == (12, 32)


def test_ids_the_model_cannot_read_give_one_line_errors(tmp_path):
    posterior = HuggingFacePosterior(tiny_bert())
    x_N_L, y_N = token_ids(5)
    for bad in (x_N_L[:, 0], x_N_L[..., None]):
        shape = str(list(bad.shape)).replace("[", r"\[").replace("]", r"\]")
        with pytest.raises(InvalidArgumentError, match=rf"inputs must be token ids \[N, L\].*, got shape {shape}$"):
            posterior.log_probs(bad, num_samples=2, generator=0)
        with pytest.raises(InvalidArgumentError, match=rf"input_ids must be token ids \[n, L\].*, got shape {shape}$"):
            posterior.fit((bad, y_N), generator=0)
        args = transformers.TrainingArguments(output_dir=str(tmp_path), num_train_epochs=1, report_to="none",
                                              use_cpu=True)
        with pytest.raises(InvalidArgumentError, match=rf"train input_ids must be token ids \[n, L\].*{shape}$"):
            HuggingFacePosterior(tiny_bert(), training_args=args).fit((bad, y_N), generator=0)
    # a failure inside the model itself: the native wording, the model's error as the cause
    empty = torch.zeros(5, 0, dtype=torch.long)
    with pytest.raises(InvalidArgumentError, match=r"the model cannot read inputs of shape \[5, 0\]") as error:
        posterior.module(empty)
    assert "\n" not in str(error.value)
    assert isinstance(error.value.__cause__, RuntimeError)


def test_numpy_token_ids_are_read_as_tensors_in_fit_and_log_probs(tmp_path):
    """The Trainer's fit on NumPy ids was a raw AttributeError ('numpy.ndarray' object has no attribute 'long'),
    activebayes' fit and log_probs refused them."""
    x_N_L, y_N = token_ids(8)
    args = transformers.TrainingArguments(output_dir=str(tmp_path), num_train_epochs=1, per_device_train_batch_size=4,
                                          report_to="none", use_cpu=True, save_strategy="no", disable_tqdm=True)
    for options in (dict(training_args=args), dict(fit_options={"max_epochs": 1})):
        weights = []
        for train in ((x_N_L, y_N), (x_N_L.numpy(), y_N.numpy())):
            posterior = HuggingFacePosterior(tiny_bert(), **options)
            posterior.fit(train, validation=train, generator=0)
            weights.append(posterior.model.classifier.weight.detach().clone())
        torch.testing.assert_close(weights[0], weights[1], rtol=0, atol=0)
    torch.testing.assert_close(posterior.log_probs(x_N_L.numpy(), num_samples=2, generator=1),
                               posterior.log_probs(x_N_L, num_samples=2, generator=1), rtol=0, atol=0)


def test_trainer_fit_names_class_ids_the_model_has_no_logits_for(tmp_path):
    """labels + 1 was a raw IndexError (Target 3 is out of bounds) from inside the Trainer."""
    x_N_L, y_N = token_ids(6)
    args = transformers.TrainingArguments(output_dir=str(tmp_path), num_train_epochs=1, report_to="none",
                                          use_cpu=True, save_strategy="no", disable_tqdm=True)
    posterior = HuggingFacePosterior(tiny_bert(), training_args=args)  # num_labels=3
    with pytest.raises(InvalidArgumentError, match=r"^train targets hold class id 3, but the model returns logits for "
                                                   r"C = 3 classes \(its config.num_labels\): class ids count from 0 "
                                                   r"and these start at 1 \(subtract 1\?\)"):
        posterior.fit((x_N_L, torch.tensor([1, 2, 3, 1, 2, 3])), generator=0)
    with pytest.raises(InvalidArgumentError, match=r"^val targets hold class id 5, .*needs at least 6 outputs"):
        posterior.fit((x_N_L, y_N), validation=(x_N_L, y_N + 5 * (y_N == 0)), generator=0)
    with pytest.raises(InvalidArgumentError, match=r"^train targets must be class ids >= 0, got -1"):
        posterior.fit((x_N_L, y_N - 1), generator=0)
    # the same wording as activebayes' fit (no Trainer)
    with pytest.raises(InvalidArgumentError, match=r"^train targets hold class id 3, .*\(subtract 1\?\)"):
        HuggingFacePosterior(tiny_bert(), fit_options={"max_epochs": 1}).fit(
            (x_N_L, torch.tensor([1, 2, 3, 1, 2, 3])), generator=0)


def test_fit_options_are_checked_when_the_posterior_is_built(tmp_path):
    """A misspelt key was a raw TypeError at the first fit; with training_args fit_options were ignored."""
    with pytest.raises(InvalidArgumentError, match=r"^fit_options has unknown key 'max_epoch' \(did you mean "
                                                   r"'max_epochs'\?\); expected keys of activebayes.models.fit: "):
        HuggingFacePosterior(tiny_bert(), fit_options={"max_epoch": 1})
    with pytest.raises(InvalidArgumentError, match=r"^fit_options cannot set 'generator': HuggingFacePosterior.fit "
                                                   r"passes"):
        HuggingFacePosterior(tiny_bert(), fit_options={"generator": 0})
    args = transformers.TrainingArguments(output_dir=str(tmp_path), report_to="none", use_cpu=True)
    with pytest.raises(InvalidArgumentError, match=r"^fit_options are for training without a Trainer"):
        HuggingFacePosterior(tiny_bert(), training_args=args, fit_options={"max_epochs": 1})
