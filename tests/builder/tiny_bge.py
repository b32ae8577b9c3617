"""A tiny random-init BGE-M3-shaped checkpoint (XLM-R) saved in a test's temp dir.

FlagEmbedding's ``BGEM3FlagModel`` loads it like ``BAAI/bge-m3``: config + safetensors,
tokenizer files (a word-level-ish BPE trained here in milliseconds), ``colbert_linear.pt`` and
``sparse_linear.pt``. ``initializer_range=0.5`` makes the vectors of different texts differ.
"""

from __future__ import annotations

from pathlib import Path

SPECIALS = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]


def build_tiny_bge_m3(root: Path, corpus: list[str], hidden: int = 32) -> Path:
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast, XLMRobertaConfig, XLMRobertaModel

    root.mkdir(parents=True, exist_ok=True)
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator(corpus, trainers.BpeTrainer(vocab_size=300, special_tokens=SPECIALS))
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>",
        pair="<s> $A </s> </s> $B </s>",
        special_tokens=[("<s>", tok.token_to_id("<s>")), ("</s>", tok.token_to_id("</s>"))],
    )
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<s>",
        eos_token="</s>",
        unk_token="<unk>",
        pad_token="<pad>",
        cls_token="<s>",
        sep_token="</s>",
        mask_token="<mask>",
    )
    fast.save_pretrained(root)
    torch.manual_seed(0)
    cfg = XLMRobertaConfig(
        vocab_size=tok.get_vocab_size(),
        hidden_size=hidden,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=2 * hidden,
        max_position_embeddings=66,
        initializer_range=0.5,
        pad_token_id=tok.token_to_id("<pad>"),
        bos_token_id=tok.token_to_id("<s>"),
        eos_token_id=tok.token_to_id("</s>"),
    )
    XLMRobertaModel(cfg).save_pretrained(root)
    torch.save(torch.nn.Linear(hidden, hidden).state_dict(), root / "colbert_linear.pt")
    torch.save(torch.nn.Linear(hidden, 1).state_dict(), root / "sparse_linear.pt")
    return root
