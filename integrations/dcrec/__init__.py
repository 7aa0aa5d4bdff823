"""DCRec (debiased contrastive sequential recommendation) adapter; so far its ranking metrics."""
