"""open_clip: any cl-plugins strategy in place of ``open_clip.loss.ClipLoss`` (see :mod:`.loss`)."""

from .loss import StrategyClipLoss

__all__ = ["StrategyClipLoss"]
