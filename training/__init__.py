"""Synthetic training and evaluation data: (text, gold) pairs for the domain schemas.

Everything is drawn from a ``random.Random`` passed in, so a seed fixes the output; nothing
happens at import. ``generate`` is the entry point (functions and a CLI). Knows nothing of
models, tokenizers or canvases, and never reads the real notices kept for evaluation.
"""
