"""Analysis of a model's embeddings on 3XCM: silhouettes per language and country, their
Pearson correlation with SP, UMAP projections (``python -m benchmark analyze``)."""
