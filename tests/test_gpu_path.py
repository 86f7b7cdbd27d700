"""The GPU path of the library: device choice, bfloat16 autocast, the fused attention backends, torch.compile.

Tests marked ``gpu`` run only where CUDA is available (tests/conftest.py skips them otherwise; `make test` runs
``-m "not gpu"``). On a GPU machine: ``pytest tests/test_gpu_path.py -m gpu``. The unmarked tests check on the CPU
the same options (``amp='bf16'``, ``compile=True``) that the GPU settings of the chapters use.
"""
import math
import os

import pytest
import torch
import torch.nn.functional as F

import transformer_lib as tl
from transformer_lib.models import DecoderLM, DecoderLMConfig
from transformer_lib.multihead import MultiHeadAttention

V, T = 32, 16


def small_lm(**kw) -> DecoderLM:
    torch.manual_seed(0)
    cfg = dict(vocab_size=V, d_model=64, n_heads=4, n_layers=2, d_ff=128, max_len=64)
    cfg.update(kw)
    return DecoderLM(DecoderLMConfig(**cfg))


def get_batch(step: int):
    g = torch.Generator().manual_seed(step)
    x = torch.randint(0, V, (8, T + 1), generator=g)
    return x[:, :-1], x[:, 1:]


def finite_grads(model) -> bool:
    return all(p.grad is None or bool(torch.isfinite(p.grad).all()) for p in model.parameters())


# ------------------------------------------------------------------------------------------- CUDA
@pytest.mark.gpu
def test_get_device_picks_cuda(monkeypatch):
    monkeypatch.delenv("TL_DEVICE", raising=False)
    assert tl.training.get_device().type == "cuda"


@pytest.mark.gpu
def test_decoder_lm_bf16_autocast_forward_backward(cuda):
    model = small_lm().to(cuda)
    x, y = (t.to(cuda) for t in get_batch(0))
    with torch.no_grad():
        ref = F.cross_entropy(model(x).reshape(-1, V), y.reshape(-1))  # float32
    with torch.autocast("cuda", dtype=torch.bfloat16):
        logits = model(x)
        loss = F.cross_entropy(logits.reshape(-1, V), y.reshape(-1))
    assert logits.dtype == torch.bfloat16  # the matmuls ran in bfloat16
    assert all(p.dtype == torch.float32 for p in model.parameters())  # master weights stay float32
    loss.backward()
    assert math.isfinite(loss.item()) and finite_grads(model)
    assert abs(loss.item() - ref.item()) < 5e-2 * ref.item()


@pytest.mark.gpu
def test_fit_bf16_on_cuda(cuda):
    model = small_lm()
    history = tl.training.fit(model, get_batch, tl.training.lm_loss, steps=20, lr=3e-3, device="cuda", amp="bf16",
                              progress=False)
    assert next(model.parameters()).device.type == "cuda"
    assert all(math.isfinite(v) for v in history.train_loss)
    assert history.train_loss[-1] < history.train_loss[0]


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_fast_path_runs_on_flash_or_efficient_kernels(cuda, dtype):
    """With only the flash and memory-efficient backends allowed, our fast path still runs (forward, backward)
    and equals the reference path: it never needs PyTorch's O(T²)-memory math fallback."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    mha = MultiHeadAttention(64, 4).to(cuda, dtype)
    x = torch.randn(2, 128, 64, device=cuda, dtype=dtype, requires_grad=True)
    with sdpa_kernel([SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION]):
        out = mha(x, causal=True)
        out.float().sum().backward()
    ref, _ = mha(x, causal=True, return_weights=True)
    torch.testing.assert_close(out.float(), ref.float(), atol=3e-2, rtol=3e-2)
    assert torch.isfinite(x.grad).all()


@pytest.mark.gpu
def test_masked_and_cached_fast_path_runs_on_efficient_kernel(cuda):
    """A padding mask, or a KV cache (queries shorter than keys), needs an explicit mask: the memory-efficient
    kernel takes it."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    mha = MultiHeadAttention(64, 4).to(cuda)
    x = torch.randn(2, 12, 64, device=cuda)
    mask = tl.attention.padding_mask(torch.tensor([12, 7], device=cuda))
    with sdpa_kernel([SDPBackend.EFFICIENT_ATTENTION]):
        masked = mha(x, mask=mask)
        cache = tl.multihead.LayerCache()
        mha(x[:, :8], causal=True, cache=cache)
        stepped = mha(x[:, 8:], causal=True, cache=cache)
    torch.testing.assert_close(masked, mha(x, mask=mask, return_weights=True)[0], atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(stepped, mha(x, causal=True)[:, 8:], atol=1e-4, rtol=1e-4)


@pytest.mark.gpu
def test_torch_compile_decoder_lm_on_cuda(cuda):
    model = small_lm().to(cuda).eval()
    x, _ = (t.to(cuda) for t in get_batch(0))
    compiled = torch.compile(model)
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), model(x), atol=1e-4, rtol=1e-4)


# ------------------------------------------------------------------------------------------- CPU
def test_fit_bf16_autocast_runs_on_cpu():
    """``amp='bf16'`` is the GPU setting; on the CPU it runs too (slower), with the same loss up to bfloat16."""
    plain = tl.training.fit(small_lm(), get_batch, tl.training.lm_loss, steps=2, device="cpu", progress=False)
    bf16 = tl.training.fit(small_lm(), get_batch, tl.training.lm_loss, steps=2, device="cpu", amp="bf16",
                           progress=False)
    assert all(math.isfinite(v) for v in bf16.train_loss)
    assert bf16.train_loss[0] == pytest.approx(plain.train_loss[0], rel=2e-2)


@pytest.mark.slow
@pytest.mark.skipif(os.environ.get("TL_TEST_COMPILE") != "1",
                    reason="torch.compile of a DecoderLM on the CPU takes about 90 s with a cold Inductor cache on "
                           "the 2-core CI machine (C++ kernels are compiled), over the suite's budget; "
                           "tests/test_training.py compiles a small classifier through fit in CI instead. "
                           "Run with TL_TEST_COMPILE=1")
def test_fit_compile_decoder_lm_on_cpu():
    """``fit(compile=True)`` wraps the model in torch.compile; on the CPU it follows the eager run."""
    small = dict(d_model=32, n_heads=2, n_layers=1, d_ff=64)
    eager = tl.training.fit(small_lm(**small), get_batch, tl.training.lm_loss, steps=2, device="cpu",
                            progress=False)
    try:
        compiled = tl.training.fit(small_lm(**small), get_batch, tl.training.lm_loss, steps=2, device="cpu",
                                   compile=True, progress=False)
    except Exception as err:  # no C++ compiler or an unsupported platform: the option exists, Inductor does not
        pytest.skip(f"torch.compile unavailable here: {type(err).__name__}: {err}")
    assert compiled.train_loss == pytest.approx(eager.train_loss, rel=1e-4, abs=1e-5)
