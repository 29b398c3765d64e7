"""Which GPU kernels run in plain FP32 where tensor cores could take them: GEMMs by their cuBLAS names,
convolutions by the cuDNN paths that run in FP32.

cuBLAS names tell: `sgemm`, `simt`, `gemm_f32f32_f32f32` without `tf32` are plain FP32; tensor-core
kernels say tensorop / tf32 / s1688 / h884 / bf16 / f16 / wgmma.
cuDNN has several FP32 convolution paths, taken where TF32 is off (cudnn.allow_tf32 = False) or absent
(Volta, Turing): implicit GEMMs on FFMA, `scudnn`, FFT (its transforms, the filter flip, complex GEMMs),
Winograd and the generic engines; and in a channels_last model the transposes cuDNN puts around them
(they run in NCHW). Measured on an H100 (the twenty-first held-out set): with TF32 off, a channels_last
fp32 conv net spent 81% of its GPU time in those, and TF32 replaced all of them with NHWC tensor-core
kernels (26.7 -> 8.8 ms of GPU work per step).
With TF32 on, cuDNN still picks some FP32 kernels where its heuristics find them faster (HTA's A100
AlexNet runs a 1 ms scudnn beside TF32 xmma convolutions), and a mixed-precision model's convolutions run
in fp16 or bf16 beside a few in FP32: one tensor-core convolution in the trace says the setting is not
what holds the others back, and no FP32 convolution counts.
"""
from __future__ import annotations

from .model import TraceModel

# (Not cuBLAS's matrix-vector kernels, gemv2T_kernel and gemvx: a product with one column has no tensor-core path,
# and TF32 leaves it as it is. A float32 MLP's 2048 -> 1 head ran them with TF32 on, the fifty-fifth set's control.)
FP32_GEMM = r"sgemm|simt|gemm_f32f32_f32f32|gemmSN"
TENSOR_CORE = r"tf32|tensorop|s1688|s16816|h884|h1688|h16816|bf16|f16|hmma|wgmma|i8|bfloat16|half"
CONV = r"conv(?!ert)|fprop|dgrad|wgrad|scudnn|fft2d_|winograd"
FP32_CONV = (r"scudnn|implicit_gemm\w*_f32f32_f32f32|implicit_convolve_sgemm|fft2d_\w*<float|flip_filter<float|"
             r"region_transform\w*<.*float2|gemm_cf32cf32|winograd\w*<float|_engine\w*<float|"
             r"(?:nchwToNhwc|nhwcToNchw)Kernel<float")
# The parts of an FP32 convolution path that its tensor-core replacement does not run at all (an H100's
# TF32 convolutions ran none of them): FFT's filter flip and tiling, and the NCHW transposes.
FP32_CONV_EXTRAS = r"flip_filter<float|region_transform\w*<.*float2|(?:nchwToNhwc|nhwcToNchw)Kernel<float"
TENSOR_CORE_CONV = rf"(?i)^(?=.*(?:{CONV})).*(?:{TENSOR_CORE})"
# An FP32 GEMM that is not a convolution's (those are FP32_CONV's to count) nor a half/bf16/tensor-core
# one (cuDNN's implicit sgemm runs bf16 too). Case-blind, as are the names it is joined with.
FP32_GEMM_ONLY = rf"(?i)^(?!.*(?:{CONV}))(?!.*(?:{TENSOR_CORE})).*(?:{FP32_GEMM})"
# FP32 inputs on tensor cores: cuBLAS's TF32 kernels, CUTLASS's s1688/s16816 GEMMs without a 16-bit type. Not a
# convolution's (cuDNN's TF32 setting is its own, on by default: HTA's A100 AlexNet runs TF32 convolutions beside
# FP32 sgemm).
TF32_GEMM = rf"(?i)^(?!.*(?:{CONV}))(?!.*(?:bf16|f16|h884|h1688|h16816))(?=.*(?:gemm|xmma)).*(?:tf32|s1688gemm|s16816gemm)"


def fp32_gemms_count(model: TraceModel) -> bool:
    """Whether the trace's plain FP32 GEMMs count: none ran on TF32 tensor cores. One that did says TF32 is on, and the
    FP32 ones left are cuBLAS's choice for their shapes (a skinny product), not the setting's: it would not change them."""
    return model.memo("fp32_gemms_count", lambda: not bool(len(model.gpu) and model.gpu_match(TF32_GEMM).any()))


def fp32_convolutions_count(model: TraceModel) -> bool:
    """Whether the trace's FP32 convolution kernels (FP32_CONV) count: some ran, and no convolution ran on
    tensor cores (then the setting or the GPU is what keeps them in FP32)."""
    return model.memo("fp32_convolutions_count", lambda: bool(
        len(model.gpu) and model.gpu_match(FP32_CONV).any() and not model.gpu_match(TENSOR_CORE_CONV).any()))


# Kernels that compute on float64 (doubles). The element type shows in the kernel's template arguments
# (FillFunctor<double>, ReduceOp<double, ...>, a lambda(double)), or in cuBLAS's name for a double GEMM
# (dgemm, d884gemm, f64f64), or in a pointer parameter (cuDNN's dgrad_engine<...>(int, double const*, ...)). A
# kernel's name also lists its scalar parameters, and those are double for any dtype (the fused Adam's lr and
# betas, batch norm's eps and momentum): ", double," there is no float64 data.
FP64 = (r"<double\b|gemv\w*<(?:int, )*double\b|lambda\(double|\(double(?:, double)*\)#|\bdouble(?: const)?\*|dgemm|"
        r"d884gemm|d8816gemm|f64f64|gemm_f64")
# Of those, the GEMMs and convolutions: on a data-centre GPU float64 runs at the FP32 rate (A100 19.5 against
# 19.5 TFLOP/s, H100 67 against 67), so TF32 gains on them what it gains on plain FP32 ones. Not cuBLAS's
# matrix-vector kernels (gemv): memory-bound, they gain what half the bytes gives (set 55's 2048 -> 1 head: 1.1-1.6x).
FP64_MATMUL = rf"(?i)^(?=.*(?:{FP64})).*(?:gemm|{CONV})"
