"""3XCM evaluator: score retrievers for association (SP) and prevalence (LBKL/DLBKL) bias.

It imports nothing from ``builder``, ``annotation`` or ``triplets``; heavy libraries only in
the adapters that need them.
"""
