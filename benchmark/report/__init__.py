"""Reports from results files: leaderboard, figures, comparison with the authors (``python -m benchmark report``)."""
