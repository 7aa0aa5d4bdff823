"""Pieces every adapter shares: data locations, seeding, tracking."""
