"""Tests never reach the network for data: registered datasets that are missing stay missing (the download
tests serve their files from 127.0.0.1 and lift this for themselves)."""

import os

os.environ.setdefault("CL_PLUGINS_OFFLINE", "1")
