"""The loss kernels: the log-sum-exp over each anchor's negatives without the dense path's [A, M] copies.

* :mod:`.fused`: one [A, M] buffer, overwritten in place in backward (scalar temperatures and per-pair maps with
  an explicit derivative);
* :mod:`.streaming`: tiles of the [A, M] matrix recomputed in backward, never the matrix (any batch size).

Strategies reach them through :class:`cl_plugins.extension.LazyLogits`; ``kernel=`` of every loss picks one.
"""
