"""Social-bias benchmarks of masked language models and sentence encoders: StereoSet, CrowS-Pairs, SEAT."""
