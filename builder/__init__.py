"""3XCM builder: staged construction of the image pool, one module per stage.

The stage list and its runner are ``pipeline.stages.STAGES`` and ``python -m pipeline run``
(``python -m pipeline run`` is an alias).
The work dir's ``catalog.sqlite`` is the single source of truth (see ``builder.catalog``).
"""
