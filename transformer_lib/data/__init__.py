"""Data: tokenizers, the book's synthetic tasks, the language-model corpus and batching. Nothing is downloaded.

The package's modules, in the order the chapters meet them:

* :mod:`~transformer_lib.data.tokenizers`: the special token ids, :class:`~transformer_lib.data.tokenizers.Vocab`,
  a character tokenizer and byte-pair encoding.
* :mod:`~transformer_lib.data.tasks`: subject–verb agreement, look-back and key–value retrieval, generated from a
  seed.
* :mod:`~transformer_lib.data.translation`: the translation task, an English-like grammar translated into an
  invented verb-final language, with its long-range and length splits.
* :mod:`~transformer_lib.data.batching`: padded seq2seq batches, the language-model corpus (shipped with Python)
  and its batches, the counted bigram baseline.

Every public name is importable from the package: ``tl.data.Vocab``, ``tl.data.make_translation_data``,
``tl.data.lm_batch``.
"""
from .batching import (Seq2SeqBatch, batches_by_length, bigram_loss, iterate_batches, lm_batch, lm_batches,
                       lm_splits, load_corpus, make_seq2seq_batch, pad_sequences)
from .tasks import (AGREEMENT_VERBS, agreement_vocab, make_agreement_data, make_lookback_data, make_retrieval_data,
                    retrieval_vocab_size)
from .tokenizers import (BOS, BOS_ID, EOS, EOS_ID, IGNORE_INDEX, PAD, PAD_ID, SPECIALS, UNK, UNK_ID, BPETokenizer,
                         CharTokenizer, Vocab, pretokenize)
from .translation import (TRANSLATION_LEXICON, alignment, describe_translation, make_long_range_data,
                          make_translation_data, reference_translate, subject_verb_distance, translation_splits,
                          translation_vocabs)

__all__ = ["AGREEMENT_VERBS", "BOS", "BOS_ID", "BPETokenizer", "CharTokenizer", "EOS", "EOS_ID", "IGNORE_INDEX",
           "PAD", "PAD_ID", "SPECIALS", "Seq2SeqBatch", "TRANSLATION_LEXICON", "UNK", "UNK_ID", "Vocab",
           "agreement_vocab", "alignment", "batches_by_length", "bigram_loss", "describe_translation",
           "iterate_batches", "lm_batch", "lm_batches", "lm_splits", "load_corpus", "make_agreement_data",
           "make_long_range_data", "make_lookback_data", "make_retrieval_data", "make_seq2seq_batch",
           "make_translation_data", "pad_sequences", "pretokenize", "reference_translate", "retrieval_vocab_size",
           "subject_verb_distance", "translation_splits", "translation_vocabs"]
