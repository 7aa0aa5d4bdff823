"""MSC (Mean-Shifted Contrastive loss) one-class anomaly detection with any cl-plugins strategy."""
