"""Vision adapters: SimCLR / SimCo / MoCo v2 / SimMoCo with kNN and linear evaluation, in plain torch."""
