"""Deep ensembles: K independently initialised members = K function samples.

Lakshminarayanan et al. 2017 ("Simple and scalable predictive uncertainty
estimation using deep ensembles"); Beluch et al. 2018 for active learning.
``predict_log_probs(ensemble, data)`` returns ``[N, E, C]`` with sample ``k``
= member ``k``, so every acquisition function works with either posterior.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch import Tensor, nn

from activebayes._validation import check_callable, check_positive_int, first_few
from activebayes._seeding import as_generator, draw_seed, global_rng_seeded
from activebayes.errors import InvalidArgumentError, InvalidTypeError

__all__ = ["Ensemble"]


class Ensemble(nn.Module):
    """K members, each one function sample; ``forward(x) -> logits [n, K, C]``.

    Members run in whatever mode the ensemble is in; MC dropout layers inside
    members are not sampled (each member is one deterministic function at
    prediction time).  ``fit`` trains every member on its own seeded stream.

    Example:
        >>> ens = Ensemble.from_factory(lambda: nn.Linear(4, 3), 5, generator=0)
        >>> ens(torch.randn(2, 4)).shape
        torch.Size([2, 5, 3])
    """

    def __init__(self, members: Sequence[nn.Module]) -> None:
        super().__init__()
        members = list(members)
        if not members:
            raise InvalidArgumentError("members must hold at least one nn.Module, got an empty sequence")
        for index, member in enumerate(members):
            if not isinstance(member, nn.Module):
                raise InvalidTypeError(f"members[{index}] must be a torch.nn.Module, got {type(member).__name__}")
        self.members = nn.ModuleList(members)

    @classmethod
    def from_factory(
        cls,
        factory: Callable[[], nn.Module],
        size: int,
        *,
        generator: torch.Generator | int | None = None,
    ) -> Ensemble:
        """``size`` members from ``factory()``, member ``m`` initialised under its own seed.

        The seeds are drawn from ``generator`` (a generator, an int seed, or the
        global RNG when ``None``), so the same seed gives bitwise the same members.
        """
        check_positive_int(size, "size")
        check_callable(factory, "factory", arguments=0,
                       expected="() -> a new nn.Module, each member built under its own seed of the global RNG")
        gen = as_generator(generator)
        members = []
        for _ in range(size):
            with global_rng_seeded(draw_seed(gen)):
                member = factory()
            if not isinstance(member, nn.Module):
                raise InvalidTypeError(f"factory must return a new torch.nn.Module per call, got "
                                       f"{type(member).__name__}")
            members.append(member)
        return cls(members)

    @property
    def num_function_samples(self) -> int:
        """K: one function sample per member."""
        return len(self.members)

    def __len__(self) -> int:
        return len(self.members)

    def split_frozen(self) -> tuple[Callable[[Tensor], Tensor], Ensemble] | None:
        """``(encode, heads)`` when every member starts with the same frozen encoder
        (:func:`~activebayes.models.encoders.split_frozen`), else ``None``."""
        from activebayes.models.encoders import split_frozen

        splits = [split_frozen(member) for member in self.members]
        if any(s is None for s in splits) or len({id(_owner(s[0])) for s in splits}) != 1:
            return None
        return splits[0][0], Ensemble([rest for _, rest in splits])

    def forward_samples(self, inputs: Tensor, sample_ids: Sequence[int]) -> Tensor:
        """Logits ``[n, k, C]`` of the members ``sample_ids`` (a shared frozen encoder runs once)."""
        split = self.split_frozen()
        if split is not None:
            encode, heads = split
            return heads.forward_samples(encode(inputs), sample_ids)
        outputs = [self.members[k](inputs) for k in sample_ids]
        members_of: dict[str, list[str]] = {}  # each output shape, and the members giving it
        for k, output in zip(sample_ids, outputs):
            shape = str(list(output.shape)) if isinstance(output, Tensor) else type(output).__name__
            members_of.setdefault(shape, []).append(str(k))
        if len(members_of) > 1:
            got = "; ".join(f"members {first_few(ks, 5)} give {shape}" for shape, ks in members_of.items())
            raise InvalidArgumentError(f"the ensemble's members must all return logits [n, C] for the same C "
                                       f"classes, got: {got}")
        return torch.stack(outputs, dim=1)

    def forward(self, inputs: Tensor) -> Tensor:
        """Logits ``[n, K, C]`` of every member."""
        return self.forward_samples(inputs, range(len(self.members)))


def _owner(encode: Callable[[Tensor], Tensor]) -> object:
    """The object behind ``encode`` (a bound method's instance, else ``encode``)."""
    return getattr(encode, "__self__", encode)
