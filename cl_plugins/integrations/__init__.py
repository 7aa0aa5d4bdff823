"""Adapters that put cl-plugins losses into existing codebases (one sub-package per target)."""
