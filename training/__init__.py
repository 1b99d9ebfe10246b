"""Training the built-in model (`python -m training.train`) and its fill-in-the-middle data."""
