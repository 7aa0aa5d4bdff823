"""open_clip: any cl-plugins strategy in place of ``open_clip.loss.ClipLoss`` (see :mod:`.loss`)."""

from cl_plugins.integrations.frameworks.open_clip.loss import StrategyClipLoss

__all__ = ["StrategyClipLoss"]
