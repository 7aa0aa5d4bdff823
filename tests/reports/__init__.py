"""Verification reports: scripts that run the suite's checks wider (patch parity with the real upstream code, the
bad-input census) and print their tables. Run as ``python tests/reports/<name>.py``; pytest collects none of them."""
