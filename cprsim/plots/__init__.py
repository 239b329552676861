"""Figures from result files (matplotlib is imported inside each function)."""
