"""Dataset readers for the evaluator's tasks (3XCM release / authors' CSV; XM3600)."""
