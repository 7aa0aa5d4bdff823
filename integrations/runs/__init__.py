"""The run core every trainer shares: run configuration and command line, the training loop, the run guard,
atomic writes, the saved-model format, Accelerate setup and tracking, results files."""
