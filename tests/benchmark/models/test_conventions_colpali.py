"""ColQwen2.5's conventions against colpali-engine's own code: processor and scorer.

colpali-engine 0.3.12 is what ``make`` installs (``--no-deps``: it pins torch<2.8 and
transformers<4.54, so only its processor and scorer modules are used); its processor and scorer
are those of git 9bee9b2b, the commit the paper's authors pinned (v0.3.12 plus a sampler fix).
Without it these tests skip.
"""

from __future__ import annotations

import importlib.metadata

import numpy as np
import pytest

from benchmark import registry
from benchmark.embeddings import MultiVector
from benchmark.models.colqwen import colpali_score_multi_vector
from tests.benchmark.models.tiny import TEXTS, images, tiny_colqwen_dir

pytest.importorskip("colpali_engine", reason="colpali-engine not installed (the Makefile "
                    "installs colpali-engine==0.3.12 with --no-deps)")
if importlib.metadata.version("colpali-engine") != "0.3.12":
    pytest.skip("these tests compare with colpali-engine 0.3.12 (the authors' 9bee9b2b)",
                allow_module_level=True)


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return tiny_colqwen_dir(tmp_path_factory.mktemp("colpali") / "colqwen")


def colpali_processor(folder):
    """colpali's ColQwen2_5_Processor on the tiny checkpoint, with the PIL image processor
    transformers 4.53 gave it. Its 0.3.12 ``__init__(*args, **kwargs)`` hides the sub-processor
    names that transformers 5 reads from the signature; this subclass only restores the
    signature (as colpali 0.3.18 does): process_queries / process_texts / process_images /
    score_multi_vector are colpali's code."""
    from colpali_engine.models import ColQwen2_5_Processor
    from transformers import AutoImageProcessor, Qwen2VLProcessor

    class Processor(ColQwen2_5_Processor):
        def __init__(self, image_processor=None, tokenizer=None, video_processor=None,
                     chat_template=None, **kw):
            Qwen2VLProcessor.__init__(self, image_processor, tokenizer, video_processor,
                                      chat_template=chat_template, **kw)
            self.tokenizer.padding_side = "left"

    base = Qwen2VLProcessor.from_pretrained(str(folder))
    return Processor(image_processor=AutoImageProcessor.from_pretrained(str(folder), backend="pil"),
                     tokenizer=base.tokenizer, video_processor=base.video_processor)


def adapter(folder, profile):
    return registry.load_model("colqwen2.5-v0.2", conventions=profile, device="cpu",
                               checkpoint=str(folder))


def batch_of(m, call):
    seen = []
    orig = m._forward
    m._forward = lambda b: (seen.append(b), orig(b))[1]
    call()
    del m._forward
    return seen[0]


def test_authors_colpali_has_the_query_prefix():
    from colpali_engine.models import ColQwen2_5_Processor

    assert ColQwen2_5_Processor.query_prefix == "Query: "
    assert ColQwen2_5_Processor.query_augmentation_token == "<|endoftext|>"


@pytest.mark.parametrize("profile", ["reference", "authors"])
def test_query_token_ids_equal_process_queries(folder, profile):
    proc = colpali_processor(folder)
    m = adapter(folder, profile)
    ours = batch_of(m, lambda: m.encode_texts(TEXTS))
    theirs = proc.process_queries(TEXTS)  # prefix + text + 10 augmentation tokens, left padded
    assert ours["input_ids"].tolist() == theirs["input_ids"].tolist()
    assert ours["attention_mask"].tolist() == theirs["attention_mask"].tolist()


def test_image_inputs_equal_process_images(folder):
    import torch

    proc = colpali_processor(folder)
    m = adapter(folder, "authors")
    imgs = [images(1, size=60)[0], images(2, size=100)[1]]
    ours = batch_of(m, lambda: m.encode_images(imgs))
    theirs = proc.process_images(imgs)
    assert ours["input_ids"].tolist() == theirs["input_ids"].tolist()
    assert ours["image_grid_thw"].tolist() == theirs["image_grid_thw"].tolist()
    # colpali pads each image's patches to the longest; ColQwen2_5.forward strips them again
    n = (theirs["image_grid_thw"][:, 1] * theirs["image_grid_thw"][:, 2]).tolist()
    unpadded = torch.cat([theirs["pixel_values"][i, :k] for i, k in enumerate(n)])
    torch.testing.assert_close(ours["pixel_values"], unpadded, rtol=0, atol=0)


def _lists(rng, n, lo, hi, d=8):
    return [rng.standard_normal((int(rng.integers(lo, hi)), d)).astype(np.float32) for _ in range(n)]


@pytest.mark.parametrize("batch_size", [2, 3, 128])
def test_score_multi_vector_emulation_equals_colpali(batch_size):
    import torch
    from colpali_engine.utils.processing_utils import BaseVisualRetrieverProcessor as B

    rng = np.random.default_rng(batch_size)
    qs, ps = _lists(rng, 5, 2, 7), _lists(rng, 7, 1, 9)
    want = B.score_multi_vector([torch.from_numpy(x) for x in qs], [torch.from_numpy(x) for x in ps],
                                batch_size=batch_size, device="cpu").numpy()
    np.testing.assert_allclose(colpali_score_multi_vector(qs, ps, batch_size), want, atol=1e-5)


def test_zero_padding_changes_the_max_and_the_authors_never_padded(folder):
    """A query token whose best real match is negative: in a batch, colpali's zero padding of
    the shorter document scores it 0; the authors scored one document per call (RQ2: BE
    l.103-118; RQ1 rerank: colqwen25_score_v2.py), where nothing is padded."""
    import torch
    from colpali_engine.utils.processing_utils import BaseVisualRetrieverProcessor as B

    q = np.array([[1.0, 0.0], [0.0, 1.0]], np.float32)
    short = np.array([[-1.0, 0.0]], np.float32)  # q token 1 best = -1; q token 2 best = 0
    long = np.array([[0.6, 0.8], [0.8, 0.6], [0.0, 1.0]], np.float32)
    batched = B.score_multi_vector([torch.from_numpy(q)], [torch.from_numpy(short),
                                                           torch.from_numpy(long)],
                                   device="cpu").numpy()[0]
    assert batched[0] == pytest.approx(0.0)  # the padded zero row beat the real -1
    # the authors' calls: one (1, L, d) query against one (1, L, d) candidate at a time
    per_doc = [B.score_multi_vector(torch.from_numpy(q[None]), torch.from_numpy(d[None]),
                                    device="cpu").item() for d in (short, long)]
    assert per_doc == pytest.approx([-1.0, 1.8])
    qm, dm = MultiVector.from_list([q]), MultiVector.from_list([short, long])
    auth = adapter(folder, "authors")  # scorer: colpali, one document per call
    np.testing.assert_allclose(auth.similarity(qm, dm)[0], per_doc, atol=1e-6)
    np.testing.assert_allclose(auth.pair_similarity(qm.take([0, 0]), dm), per_doc, atol=1e-6)
    ref = adapter(folder, "reference")  # masked MaxSim: the same numbers
    np.testing.assert_allclose(ref.similarity(qm, dm)[0], per_doc, atol=1e-6)
    # the batched semantics, when asked for, are colpali's batch
    batch = registry.load_model("colqwen2.5-v0.2", conventions="authors", device="cpu",
                                checkpoint=str(folder), scorer="colpali-batched")
    assert not batch.uses_default_similarity()
    np.testing.assert_allclose(batch.similarity(qm, dm)[0], batched, atol=1e-6)


def test_authors_scorer_on_real_embeddings_equals_colpali_per_candidate(folder):
    """Tiny-model embeddings of captions and images, scored as the authors' RQ2 evaluator did
    (one candidate per score_multi_vector call) and by the authors profile."""
    import torch
    from colpali_engine.utils.processing_utils import BaseVisualRetrieverProcessor as B

    m = adapter(folder, "authors")
    q = m.encode_texts(TEXTS)
    d = m.encode_images(images(3))
    want = np.array([[B.score_multi_vector(torch.from_numpy(qi[None]), torch.from_numpy(di[None]),
                                           device="cpu").item()
                      for di in d.to_list()] for qi in q.to_list()], np.float32)
    np.testing.assert_allclose(m.similarity(q, d), want, rtol=1e-4, atol=1e-4)
