"""Training the built-in model (`python -m engine.training.train`) and its fill-in-the-middle data."""
