"""MABEL: gender-debiased sentence encoders, and the intrinsic bias evaluations (StereoSet, CrowS-Pairs, SEAT)."""
