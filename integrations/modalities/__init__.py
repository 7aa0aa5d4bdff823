"""Code several hosts share for one modality, so that no host imports another: ``images`` (CIFAR-style ResNets,
augmentations, image datasets, feature extraction, the saved backbone) and ``text`` (the BERT sentence encoder and
its pooling, sentence data, the contrastive sentence trainer, SimCSE's ``cl_forward`` seam that MABEL's fork shares)."""
