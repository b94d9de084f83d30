"""The ``karma`` reward channel: the serving KARMA model's score of each completion.

Each completion's channel meta names the model version that scored it (``karma@3``), so a
stored group says which reward model produced its rewards. With no trained model the channel
answers 503, like ``/v1/karma/score``, with how to train one.
"""

from __future__ import annotations

from plaudit_wire.karma import ModelRefOption
from services.core.channels import Channel, ChannelOutcome, ChannelSpec, GroupInput
from services.karma.service import KarmaService, model_ref


class KarmaSpec(ChannelSpec):
    """The KARMA model's score (an unbounded logit: higher, more karma expected)."""

    model: ModelRefOption = None

    def value_range(self) -> tuple[float, float] | None:
        return None


def karma_channels(karma: KarmaService) -> list[Channel]:
    """The ``karma`` channel, run by ``karma``."""

    async def run(spec: KarmaSpec, group: GroupInput) -> ChannelOutcome:
        texts = [c.text for c in group.completions]
        scores, version = await karma.score_texts(group.prompt, texts, model=spec.model)
        stamp = model_ref(version).model_dump() | {"ref": version.ref}
        values: list[float | None] = list(scores)
        return ChannelOutcome(
            values=values,
            statuses=["ok"] * len(scores),
            meta={"model": stamp},
            details=[{} for _ in scores],
        )

    return [Channel("karma", KarmaSpec, run, "KARMA reward model: expected karma of a reply")]
