"""The loss kernels: the log-sum-exp over each anchor's negatives without the dense path's [A, M] copies.

* :mod:`.contract`: what every kernel takes and is: :class:`~.contract.LogitMap` (a per-pair map of the cosine, with
  its Triton form :class:`~.contract.TritonMap`), :class:`~.contract.Request` (one block's negatives' LSE),
  :class:`~.contract.KernelChoice`, :class:`~.contract.Bond`, :class:`~.contract.PairNetwork` and
  :class:`~.contract.Backend`; it imports no backend; :mod:`.health`: :class:`~.health.KernelHealth`, a loss's record
  of the backends that failed on it;
* :mod:`.dispatch`: which backends serve a request and in which order (``kernel=`` of every loss), decided here only;
* :mod:`.lazy`: :class:`~.lazy.LazyLogits`, a block's logits computed only inside a kernel: it builds the request;
* the backends, one per module, each a :class:`~.contract.Backend`: :mod:`.fused` (one [A, M] buffer, overwritten in
  place in backward), :mod:`.streaming` (tiles recomputed in backward, never the matrix), :mod:`.halves` (a block
  of anchors against themselves by halves), :mod:`.triton_lse` (flash-style Triton kernels, one direction; their
  launches as ``torch.library`` operators, which ``torch.compile`` takes whole) and :mod:`.triton_bonded` (Triton for a
  block against itself or bonded with its transpose), :mod:`.pair_network` (logits with a per-pair temperature
  network);
* helpers the backends share: :mod:`.autocast` (float32 regions under autocast), :mod:`.compiled` and :mod:`.tiles`
  (a per-pair map's whole tiles compiled, ``compile_maps=True``), :mod:`.negatives` (which entries of a tile are no
  negatives), :mod:`.listed_cosines` (the cosines of listed pairs), :mod:`.triton_jit` (Triton where installed, and
  the decorator of a map's Triton form), :mod:`.triton_kernels` (the jitted Triton kernels themselves),
  :mod:`.statement` (a per-pair map stated once, read as torch and as Triton code).

Strategies reach them through :mod:`cl_plugins.extension`.
"""
