"""3XCM builder: staged construction of the image pool, one module per stage (the list:
``builder.stage_list``; ``python -m pipeline run`` runs them in order). The work dir's
``catalog.sqlite`` is the single source of truth (see ``builder.catalog``)."""
