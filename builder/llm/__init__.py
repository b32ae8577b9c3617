"""The builder's LLM client (Gemini and its offline twin): ``client`` is the front door."""
