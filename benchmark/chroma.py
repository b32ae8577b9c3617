"""The authors' RQ1 search (``xm3600-i2t --engine chromadb``): an in-memory chromadb HNSW
collection (``hnsw:space = cosine``, chromadb's defaults), approximate; the ``chromadb`` extra.
"""

from __future__ import annotations

import logging
import uuid

import numpy as np

from benchmark.retrieval import TopK

log = logging.getLogger(__name__)

ENGINES = ("exact", "chromadb")
CHROMADB_SETTINGS = {"hnsw:space": "cosine"}
QUERY_BLOCK = 1000


def chromadb_topk(queries: np.ndarray, docs: np.ndarray, k: int) -> TopK:
    """Top-``k`` pool rows and cosine scores (``1 - distance``) per query, in chromadb's order."""
    try:
        import chromadb
        from chromadb.config import Settings
    except ImportError as e:
        raise ImportError("--engine chromadb needs chromadb: pip install -e '.[chromadb]'") from e
    q = np.ascontiguousarray(queries, np.float32)
    d = np.ascontiguousarray(docs, np.float32)
    if not 1 <= k <= len(d):
        raise ValueError(f"k={k} must be in 1..{len(d)} (the pool size)")
    client = chromadb.EphemeralClient(settings=Settings(anonymized_telemetry=False))
    name = f"xcm3-{uuid.uuid4().hex}"
    col = client.create_collection(name, metadata=dict(CHROMADB_SETTINGS))
    try:
        step = max(1, int(client.get_max_batch_size()))
        for s in range(0, len(d), step):
            col.add(ids=[str(i) for i in range(s, min(len(d), s + step))],
                    embeddings=d[s : s + step])
        scores = np.empty((len(q), k), np.float32)
        idx = np.empty((len(q), k), np.int64)
        for s in range(0, len(q), QUERY_BLOCK):
            res = col.query(query_embeddings=q[s : s + QUERY_BLOCK], n_results=k,
                            include=["distances"])
            for j, (ids, dist) in enumerate(zip(res["ids"], res["distances"], strict=True)):
                if len(ids) != k:
                    raise RuntimeError(f"chromadb returned {len(ids)} of {k} results")
                idx[s + j] = [int(x) for x in ids]
                scores[s + j] = 1.0 - np.asarray(dist, np.float32)
    finally:
        client.delete_collection(name)
    log.info("chromadb HNSW top-%d of %d queries over %d rows", k, len(q), len(d))
    return TopK(scores, idx)


def chromadb_version() -> str:
    import chromadb

    return str(chromadb.__version__)
