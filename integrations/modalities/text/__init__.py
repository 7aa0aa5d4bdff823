"""Text: the BERT sentence encoder and its pooling, sentence data, the contrastive sentence trainer, the
sentence-transformers export and SimCSE's ``cl_forward`` seam (used by the simcse and mabel hosts)."""
