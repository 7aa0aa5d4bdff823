"""The loss kernels: the log-sum-exp over each anchor's negatives without the dense path's [A, M] copies.

* :mod:`.lazy`: the contract, :class:`~.lazy.LogitMap` (a per-pair map of the cosine) and
  :class:`~.lazy.LazyLogits` (a block's logits, computed only inside a kernel);
* :mod:`.dispatch`: which kernel a block runs on, decided once per block (``kernel=`` of every loss);
* :mod:`.fused`: one [A, M] buffer, overwritten in place in backward (scalar temperatures and per-pair maps with
  an explicit derivative);
* :mod:`.streaming`: tiles of the [A, M] matrix recomputed in backward, never the matrix (any batch size);
* :mod:`.symmetric`: a block of anchors against themselves by halves, each tile standing for its transpose;
* :mod:`.compiled` and :mod:`.tiles`: a per-pair map's whole tiles compiled (``compile_maps=True``);
* :mod:`.triton_lse`: flash-style Triton kernels on CUDA tensors;
* :mod:`.negatives`: which entries of a tile are no negatives, the one helper every torch kernel and the dense path
  use;
* :mod:`.pairs`: the cosines of listed pairs.

Strategies reach them through :class:`cl_plugins.extension.LazyLogits`.
"""
