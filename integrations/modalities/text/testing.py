"""A tiny random BERT with a real WordPiece tokenizer, saved as a Hugging Face folder: offline smoke runs of the
text trainers (the GPU check's, the tests') without a download."""

from __future__ import annotations

from pathlib import Path

WORDS = (
    "the a an of to in and is was for on with as by at from that this it he she they we you are be "
    "man woman he she his her him boy girl mother father nurse doctor dog cat car city river music film "
    "book game team school water food house road child "
    "plays eats runs walks reads sings drives swims cooks writes watches rides opens looks sits stands "
    "red big small old new good bad fast slow happy sad green blue white black long short "
    ". , ' \" - ( ) ? !"
).split()


def make_tiny_bert(path: Path, hidden: int = 32, layers: int = 2, dropout: float = 0.1, mlm: bool = False) -> Path:
    """``mlm=True`` saves a ``BertForMaskedLM`` (with its head) instead of a ``BertModel``."""
    import torch
    from transformers import BertConfig, BertForMaskedLM, BertModel, BertTokenizerFast

    path.mkdir(parents=True, exist_ok=True)
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + sorted(set(WORDS))
    (path / "vocab.txt").write_text("\n".join(vocab) + "\n")
    # transformers 5 takes the vocabulary as ``vocab=`` (``vocab_file=`` is ignored: every token would be [UNK])
    BertTokenizerFast(vocab={w: i for i, w in enumerate(vocab)}, do_lower_case=True).save_pretrained(path)
    config = BertConfig(
        vocab_size=len(vocab),
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=2,
        intermediate_size=2 * hidden,
        max_position_embeddings=64,
        hidden_dropout_prob=dropout,
        attention_probs_dropout_prob=dropout,
    )
    torch.manual_seed(0)
    (BertForMaskedLM if mlm else BertModel)(config).save_pretrained(path)
    return path
