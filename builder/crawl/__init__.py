"""The crawl stage (``stage``) and its parts: image search, download, the catalog records."""
