"""Small PyTorch workloads used to record the sample traces (see ../README.md)."""

ALL = [
    "launch_tiny_conv",
    "launch_small_mlp",
    "sync_mask_loss",
    "pageable_h2d",
    "host_preprocess",
    "layout_nchw_fp16",
    "fp32_matmul",
    "healthy_bf16_matmul",
    "unfused_optimizer",
]
