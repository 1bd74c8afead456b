"""Recall: full text, vectors, exact filters and spatial ordering."""
