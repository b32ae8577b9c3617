"""The tagging stage (``stage``) and its parts: batch submission and the tag rules."""
