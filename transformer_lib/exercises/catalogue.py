"""The catalogue of autograded exercises: what each asks for, never how to answer it.

Each :class:`Exercise` holds the contract a student implements (signature and docstring), the tolerance of the
comparison, the library functions that answer it (a submission that calls them gets no credit) and the hints of
the common mistakes the checker recognises. The reference solutions, the case generators and the models of the
mistakes are *not* part of the library: they live with the grader (``booktools/exercise_references.py``), which
computes the expected outputs in its own process. The notebook self-check (:func:`transformer_lib.exercises.check`)
compares with outputs stored in ``transformer_lib/exercises/data/selfcheck.pt``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

__all__ = ["Exercise", "EXERCISES"]


@dataclass(frozen=True)
class Exercise:
    """One autograded exercise (its contract, not its solution).

    Attributes:
        id: ``'NN-short-name'``.
        description: one line shown by ``available()``.
        signature: the function signature students implement (also the starter's first line).
        contract: the docstring of the starter (what the function must do, with shapes).
        atol: absolute tolerance of the comparison of floating-point results.
        rtol: relative tolerance.
        exact_dtype: a floating-point result must also have the expected dtype.
        forbidden: qualified names of the library's functions and classes that answer the exercise; a submission
            that calls one gets no credit.
        mistakes: ``(key, hint)`` of the common mistakes the checker recognises (their models live with the grader).
            A hint names the mistake and the property it breaks, not the code that fixes it.
        forbidden_torch: ``(qualified name, why)`` of the torch functions and classes that do the whole exercise
            (``torch.nn.functional.layer_norm`` for "layer norm from scratch"); a submission that calls one gets no
            credit, with the reason.
    """

    id: str
    description: str
    signature: str
    contract: str
    atol: float = 1e-5
    rtol: float = 1e-4
    exact_dtype: bool = False
    forbidden: Tuple[str, ...] = ()
    mistakes: Tuple[Tuple[str, str], ...] = ()
    forbidden_torch: Tuple[Tuple[str, str], ...] = ()

    @property
    def function(self) -> str:
        """The name of the function to write (from the signature)."""
        return self.signature[len("def "):self.signature.index("(")].strip()

    @property
    def parameters(self) -> List[Tuple[str, bool]]:
        """``(name, required)`` of each parameter of the signature."""
        inner = self.signature[self.signature.index("(") + 1:self.signature.rindex(")")]
        return [(p.split("=")[0].strip(), "=" not in p) for p in inner.split(",") if p.strip()]

    def hint(self, key: str) -> Optional[str]:
        return dict(self.mistakes).get(key)


# The public attention functions and the unchecked internals the library's layers call (a layer such as
# tl.MultiHeadAttention reaches attention through them, so forbidding them forbids the layers' route too).
_ATTENTION = ("transformer_lib.attention.scaled_dot_product_attention", "transformer_lib.attention.attention_reference",
              "transformer_lib.attention._attend", "transformer_lib.attention._reference")
_SOFTMAX = ("transformer_lib.attention.masked_softmax", "transformer_lib.attention._masked_softmax")
_RNN = ("transformer_lib.rnn.make_recurrent", "transformer_lib.rnn.RNNEncoder", "transformer_lib.rnn.RNNClassifier",
        "transformer_lib.rnn.RNNSeq2Seq")
_MHA = ("transformer_lib.multihead.MultiHeadAttention", "transformer_lib.multihead.split_heads",
        "transformer_lib.multihead.merge_heads")
_SCALE = "the 1/√d_k scaling is missing"
_WHOLE_ATTENTION = "computes the whole attention in one call: the exercise is to write the scores, the softmax and the weighted sum yourself"
_TORCH_ATTENTION = (("torch.nn.functional.scaled_dot_product_attention", _WHOLE_ATTENTION),
                    ("torch.nn.MultiheadAttention", _WHOLE_ATTENTION),
                    ("torch.nn.functional.multi_head_attention_forward", _WHOLE_ATTENTION))
_WHOLE_NORM = ("normalises in one call: the exercise is to compute the statistics over the features and the "
               "normalisation yourself")

EXERCISES: Dict[str, Exercise] = {e.id: e for e in [
    Exercise(
        "01-power-law", "Fit a scaling law L = c·x^(-α) to measurements (least squares in log-log space)",
        "def fit_power_law(x, y):",
        "x, y: 1-D tensors of positive numbers. Return (c, alpha) as floats such that y ≈ c * x ** (-alpha),\n"
        "fitted by least squares on log y = log c - alpha log x.",
        atol=1e-6, rtol=1e-6,
        mistakes=(("wrong_sign", "the exponent has the wrong sign: y = c·x^(-α) falls when α > 0"),
                  ("linear", "the fit is done on x and y themselves; fit log y against log x"),
                  ("swapped", "c and alpha are returned in the wrong order: return (c, alpha)"),
                  ("log10_exp", "log10 is used for the fit but exp for c (or the other way round): use one base"),
                  ("x_on_y", "log x is regressed on log y; regress log y on log x"))),
    Exercise(
        "02-rnn-forward", "Run a vanilla RNN h_t = tanh(W_xh x_t + W_hh h_{t-1} + b) over a sequence",
        "def rnn_forward(x, W_xh, W_hh, b):",
        "x: (B, T, d_in); W_xh: (d_h, d_in); W_hh: (d_h, d_h); b: (d_h,). Start from h_0 = 0 and return all\n"
        "hidden states h_1..h_T as a (B, T, d_h) tensor, h_t = tanh(x_t W_xhᵀ + h_{t-1} W_hhᵀ + b).",
        forbidden=_RNN,
        mistakes=(("no_tanh", "the tanh nonlinearity is missing"),
                  ("transposed", "W_hh is used transposed: multiply h_{t-1} by W_hhᵀ (h @ W_hh.T)"),
                  ("no_recurrence", "the previous hidden state is not fed back (no recurrence)"),
                  ("shifted", "off by one: position t must hold h_t (after reading x_t), not h_{t-1}"),
                  ("bias_outside", "the bias is added outside the tanh"))),
    Exercise(
        "02-rnn-padded", "A vanilla RNN over a padded batch: states at the real steps and each row's last state",
        "def rnn_forward_padded(x, lengths, W_xh, W_hh, b):",
        "x: (B, T, d_in), sequences padded at the end; lengths: (B,) long, row i has lengths[i] real steps\n"
        "(1 <= lengths[i] <= T); W_xh: (d_h, d_in); W_hh: (d_h, d_h); b: (d_h,). Run\n"
        "h_t = tanh(x_t W_xhᵀ + h_{t-1} W_hhᵀ + b) from h_0 = 0 over the real steps of each row. Return\n"
        "(states, last): states (B, T, d_h) holds h_t at the real steps and zeros at the padded ones; last (B, d_h)\n"
        "is each row's state after its last real step.",
        forbidden=_RNN,
        mistakes=(("last_is_final", "`last` is taken at the final position T for every row; take each row's state "
                                    "after its own last real step (index lengths[i] - 1)"),
                  ("padding_not_zeroed", "the states at padded steps are not zero: the recurrence ran on into the "
                                         "padding"),
                  ("last_off_by_one", "off by one: the last real step of row i is index lengths[i] - 1"),
                  ("no_tanh", "the tanh nonlinearity is missing"),
                  ("transposed", "W_hh is used transposed: multiply h_{t-1} by W_hhᵀ (h @ W_hh.T)"))),
    Exercise(
        "03-seq2seq-attention", "Dot-product attention of a decoder state over encoder states, with a mask",
        "def seq2seq_attention(s, h, mask):",
        "s: (B, d) decoder state; h: (B, S, d) encoder states; mask: (B, S) bool, True = real source token.\n"
        "Return (a, alpha): alpha = softmax over the real tokens of the scores s·h_i (B, S), zeros on padding;\n"
        "a = sum_i alpha_i h_i (B, d).",
        forbidden=_ATTENTION + _SOFTMAX,
        mistakes=(("softmax_batch", "the softmax runs over the batch axis; normalise over the source positions "
                                    "(dim=-1)"),
                  ("mask_inverted", "the mask is inverted: True marks real tokens, which must be kept"),
                  ("mask_inverted_zeroed", "the mask is inverted: True marks real tokens, which must be kept"),
                  ("mask_after", "the mask is applied after the softmax, so the weights no longer sum to 1; mask the "
                                 "scores first"),
                  ("no_mask", "the mask is ignored: padding positions receive attention"),
                  ("mask_zero_fill", "masked scores are set to 0, which still gets weight after the softmax; use a "
                                     "very negative value"),
                  ("scaled", "the scores are scaled by 1/√d; this attention is the plain dot product s·h_i"))),
    Exercise(
        "04-self-attention", "Single-head scaled dot-product self-attention softmax(XW_q (XW_k)ᵀ/√d_k) XW_v",
        "def self_attention(x, W_q, W_k, W_v):",
        "x: (B, T, d); W_q, W_k: (d, d_k); W_v: (d, d_v). Return softmax(Q Kᵀ / sqrt(d_k)) V with Q = x W_q,\n"
        "K = x W_k, V = x W_v, the softmax over the keys (last axis); shape (B, T, d_v).",
        forbidden=_ATTENTION + _MHA,
        forbidden_torch=_TORCH_ATTENTION,
        mistakes=(("unscaled", _SCALE),
                  ("wrong_axis", "the softmax runs over the queries (dim=-2); it must run over the keys (dim=-1)"),
                  ("transposed_scores", "the score matrix is transposed: row i must hold q_i·k_j for all j"),
                  ("scale_d_model", "the scores are scaled by 1/√d (the width of x); the scale is 1/√d_k"),
                  ("scale_d_v", "the scores are scaled by 1/√d_v; the scale is 1/√d_k, the width of the keys"),
                  ("scale_no_sqrt", "the scores are divided by d_k; divide by √d_k"))),
    Exercise(
        "05-sinusoidal", "The sinusoidal position table of Vaswani et al. (2017)",
        "def sinusoidal(n, d):",
        "Return the (n, d) float64 table PE[p, 2i] = sin(p / 10000^(2i/d)), PE[p, 2i+1] = cos(p / 10000^(2i/d)).",
        atol=1e-5, rtol=1e-5,
        forbidden=("transformer_lib.positional.sinusoidal_table",
                   "transformer_lib.positional.SinusoidalPositionalEncoding"),
        mistakes=(("swapped", "sin and cos are swapped: even columns hold sines"),
                  ("halves", "the sines and cosines are in two halves; the paper interleaves them (even = sin, "
                             "odd = cos)"),
                  ("wrong_exponent", "the exponent is i/d; it must be 2i/d (i indexes pairs of columns)"),
                  ("from_one", "positions start at 1; the first row is position p = 0"),
                  ("base", "the base of the frequencies must be 10000"))),
    Exercise(
        "06-causal-mask", "The causal (future) mask, True = may attend",
        "def causal_mask(t):",
        "Return a (t, t) bool tensor, True where query i may attend key j, i.e. j <= i.",
        forbidden=("transformer_lib.attention.causal_mask",),
        mistakes=(("strict", "off by one: a position must also see itself (j <= i, the diagonal is True)"),
                  ("transposed", "the mask is transposed: it lets each position see the future (use the lower "
                                 "triangle)"),
                  ("inverted", "the convention is inverted: True must mean 'may attend'"))),
    Exercise(
        "06-masked-softmax", "A masked softmax safe in float16 with fully masked rows",
        "def masked_softmax(scores, mask):",
        "scores: (..., S) float (float32 or float16); mask: same shape, bool, True = may attend. Return the\n"
        "softmax over the last axis restricted to allowed entries, in the dtype of scores; rows with no allowed\n"
        "entry must be all zeros (not NaN, not uniform).",
        atol=2e-3, rtol=2e-3, exact_dtype=True,
        forbidden=_ATTENTION + _SOFTMAX,
        forbidden_torch=(("torch.nn.functional.scaled_dot_product_attention", _WHOLE_ATTENTION),),
        mistakes=(("inf", "fully masked rows come out NaN: with every score at -inf the softmax divides 0 by 0; "
                          "a row with nothing to attend to must be all zeros"),
                  ("minus_1e5", "a fixed mask value of -1e5 is not safe in every dtype: float16 cannot hold it (it "
                                "becomes -inf), and a row with nothing to attend to comes out uniform instead of all "
                                "zeros"),
                  ("wrong_axis", "the softmax is taken over the wrong axis: each query's weights over the keys (the "
                                 "last axis) must sum to 1"),
                  ("after", "the mask is applied after the softmax, so rows no longer sum to 1"),
                  ("inverted", "the mask is inverted: True means 'may attend'"),
                  ("uniform_rows", "fully masked rows come out uniform: a row with nothing to attend to must be all "
                                   "zeros"),
                  ("float32_out", "the result is float32 for float16 scores: the output must keep the dtype of "
                                  "scores"))),
    Exercise(
        "07-multihead", "Multi-head attention with explicit weights (split, attend, merge)",
        "def multihead_attention(x, W_q, W_k, W_v, W_o, n_heads):",
        "x: (B, T, D); W_q, W_k, W_v, W_o: (D, D); n_heads divides D. Head h uses features\n"
        "[h*D/H, (h+1)*D/H) of x W_q, x W_k, x W_v; each head computes softmax(q kᵀ/√(D/H)) v; the heads are\n"
        "concatenated in head order (B, T, D) and multiplied by W_o. No mask.",
        forbidden=_ATTENTION + _MHA,
        forbidden_torch=_TORCH_ATTENTION,
        mistakes=(("merge_wrong", "the heads are merged in the wrong order: transpose (B, H, T, d_h) back to "
                                  "(B, T, H, d_h) before reshaping"),
                  ("split_without_transpose", "the split reshapes to (B, H, T, d_h) directly; reshape to "
                                              "(B, T, H, d_h) then transpose"),
                  ("scale_d_model", "the scores are scaled by 1/√D; each head uses 1/√(D/H)"),
                  ("unscaled", _SCALE),
                  ("interleaved_split", "head h must take the contiguous features [h·D/H, (h+1)·D/H), not every "
                                        "H-th feature"),
                  ("no_output_projection", "the output projection W_o is missing"))),
    Exercise(
        "08-layer-norm", "Layer normalisation over the features of each token",
        "def layer_norm(x, gamma, beta, eps=1e-5):",
        "x: (..., d); gamma, beta: (d,). Normalise each token over its d features: (x - mean)/sqrt(var + eps)\n"
        "* gamma + beta with mean = (1/d)Σx_j and the biased variance (1/d)Σ(x_j - mean)².",
        forbidden=("transformer_lib.blocks.LayerNorm", "transformer_lib.blocks.make_norm"),
        forbidden_torch=(("torch.nn.functional.layer_norm", _WHOLE_NORM), ("torch.layer_norm", _WHOLE_NORM),
                         ("torch.nn.LayerNorm", _WHOLE_NORM), ("torch.nn.functional.group_norm", _WHOLE_NORM),
                         ("torch.nn.functional.instance_norm", _WHOLE_NORM)),
        mistakes=(("unbiased", "the variance is the unbiased one (1/(d-1)); layer norm uses 1/d"),
                  ("batch_axis", "the statistics are taken over the batch axis (that is batch norm); use the last "
                                 "axis"),
                  ("sum", "the mean is a sum: it needs the 1/d factor"),
                  ("eps_outside", "ε is added outside the square root: divide by sqrt(var + ε), not sqrt(var) + ε"),
                  ("no_eps", "ε is missing: divide by sqrt(var + ε)"),
                  ("fixed_eps", "the eps argument is ignored: use the eps passed to the function"),
                  ("gamma_beta_swapped", "gamma and beta are swapped: scale by gamma, then add beta"))),
    Exercise(
        "09-block-params", "Count the parameters of one Transformer encoder block",
        "def block_parameters(d_model, d_ff, n_heads, bias=True):",
        "Return the number of parameters of one encoder block: multi-head attention (W_q, W_k, W_v, W_o, each\n"
        "d_model × d_model, plus biases if bias), the feed-forward network (d_model → d_ff → d_model, plus\n"
        "biases if bias) and two layer norms (a gain each, plus a bias each if bias, as in tl.EncoderBlock).",
        forbidden=("transformer_lib.blocks.EncoderBlock", "transformer_lib.blocks.DecoderBlock",
                   "transformer_lib.models.count_parameters", "transformer_lib.blocks.FeedForward",
                   "transformer_lib.blocks.LayerNorm") + _MHA[:1],
        mistakes=(("per_head", "the per-head matrices are counted as d_model × d_model each; together the heads' "
                               "W_q/W_k/W_v are d_model × d_model"),
                  ("no_norms", "the two layer norms (2 × 2·d_model parameters, 2 × d_model without biases) are "
                               "missing"),
                  ("no_bias", "the biases are not handled as asked"),
                  ("one_norm", "there are two layer norms in a block, one per sub-layer"),
                  ("no_output_projection", "W_o (d_model × d_model, plus its bias) is missing"))),
    Exercise(
        "10-greedy-decode", "Greedy decoding of an encoder–decoder with stopping at EOS",
        "def greedy_decode(model, src, max_len):",
        "model: an EncoderDecoder; src: (B, S) source ids. Start each target with BOS (id 1), repeatedly append\n"
        "the argmax of the next-token logits, stop a row after it produces EOS (id 2) and pad the rest with PAD\n"
        "(id 0); produce at most max_len tokens. Return (B, L) ids without the BOS, L = the longest row\n"
        "(including its EOS).",
        forbidden=("transformer_lib.generation.greedy_translate", "transformer_lib.generation.beam_search",
                   "transformer_lib.generation.generate"),
        mistakes=(("no_stop", "rows go on after their EOS: once a row has produced EOS, append PAD (id 0)"),
                  ("stop_all_at_first", "decoding stops when the first row produces EOS; stop when every row has"),
                  ("always_max_len", "the output always has max_len columns; stop as soon as every row has "
                                     "produced EOS"),
                  ("keeps_bos", "the BOS token is returned; drop it"))),
    Exercise(
        "11-next-token", "Next-token distribution with temperature and top-k",
        "def next_token_probs(logits, temperature, k):",
        "logits: (B, V). Divide by temperature, keep the k largest logits of each row, and return the softmax\n"
        "over them (zeros elsewhere); shape (B, V), each row sums to 1.",
        forbidden=("transformer_lib.generation.apply_temperature", "transformer_lib.generation.top_k_filter",
                   "transformer_lib.generation.sample_top_k", "transformer_lib.generation.generate"),
        mistakes=(("times_t", "the logits are multiplied by the temperature; divide by it"),
                  ("no_renorm", "the top-k probabilities are not renormalised: apply the top-k filter to the logits "
                                "before the softmax"),
                  ("k_plus_one", "off by one: keep exactly k tokens"),
                  ("zero_fill", "the filtered logits are set to 0, which still gets probability; set them to -inf"),
                  ("smallest", "the k smallest logits are kept; keep the k largest"))),
    Exercise(
        "12-window-mask", "The sliding-window (local) attention mask",
        "def window_mask(t, w):",
        "Return a (t, t) bool tensor, True where |i - j| <= w (each query sees w neighbours on each side and\n"
        "itself).",
        forbidden=("transformer_lib.efficient.sparse_pattern", "transformer_lib.efficient.random_links",
                   "transformer_lib.efficient.SparseAttention"),
        mistakes=(("strict", "off by one: |i - j| <= w includes the w-th neighbour"),
                  ("one_sided", "the window looks only backwards; it must be symmetric (|i - j| <= w)"),
                  ("no_abs", "i - j <= w without the absolute value lets a query see the whole future"))),
    Exercise(
        "13-swiglu", "The SwiGLU feed-forward network (Shazeer, 2020)",
        "def swiglu(x, W1, W3, W2):",
        "x: (..., d); W1, W3: (d, f); W2: (f, d). Return (silu(x W1) * (x W3)) W2.",
        forbidden=("transformer_lib.blocks.FeedForward",),
        mistakes=(("wrong_gate", "the gate is on the wrong branch: silu applies to x W1"),
                  ("relu", "ReLU is used; SwiGLU gates with silu (x·sigmoid(x))"),
                  ("no_gate", "the gate x W3 is missing"),
                  ("sigmoid", "sigmoid is used (that is GLU); SwiGLU uses silu(z) = z·sigmoid(z)"),
                  ("gelu", "GELU is used (that is GeGLU); SwiGLU uses silu"))),
    Exercise(
        "13-rms-norm", "RMS normalisation (Zhang & Sennrich, 2019): no centring, no bias",
        "def rms_norm(x, gain, eps=1e-6):",
        "x: (..., d); gain: (d,). Return x / sqrt(mean(x², over the last axis) + eps) * gain: each token is\n"
        "divided by its root mean square; no mean is subtracted and there is no bias.",
        forbidden=("transformer_lib.blocks.RMSNorm", "transformer_lib.blocks.make_norm"),
        forbidden_torch=(("torch.nn.functional.rms_norm", _WHOLE_NORM), ("torch.rms_norm", _WHOLE_NORM),
                         ("torch.nn.RMSNorm", _WHOLE_NORM)),
        mistakes=(("centred", "the mean is subtracted (that is layer norm); RMS norm divides x itself by its root "
                              "mean square"),
                  ("eps_outside", "ε is added outside the square root: divide by sqrt(mean(x²) + ε)"),
                  ("no_eps", "ε is missing: divide by sqrt(mean(x²) + ε)"),
                  ("norm", "the root mean square needs the 1/d: ‖x‖/√d, not ‖x‖"),
                  ("fixed_eps", "the eps argument is ignored: use the eps passed to the function"),
                  ("no_gain", "the gain is missing: multiply by gain"))),
]}
