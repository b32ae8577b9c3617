"""The bridge to mteb: our models inside mteb, mteb's models and tasks inside ours, its results."""
