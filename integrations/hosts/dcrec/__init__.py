"""DCRec (debiased contrastive sequential recommendation) adapter; so far its data readers and ranking metrics."""
