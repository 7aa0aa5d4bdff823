"""Images: CIFAR-style ResNets, SSL augmentations, CIFAR-10 / Fashion-MNIST loading, feature extraction, the saved
backbone (used by the vision and msc hosts)."""
