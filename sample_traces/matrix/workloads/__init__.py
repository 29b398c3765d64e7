"""Matrix workloads.  Each module: NAME, EXPECTED_KIND, VARIANTS, DESCRIPTION, FIX, make(variant, device).

Modules may also define ROLE ("pair", "healthy", "trace_only"), NOTES (dict), PER_SAMPLE (bool),
WARMUP_STEPS, and record(rec, device) for trace-only classes that need their own schedule.
Existing modules in sample_traces/workloads/ are reused by import (``import workloads...``:
record_matrix.py puts sample_traces/ on sys.path).

ALL is the recording order: cheap pairs first, torch.compile and trace-only classes last.
"""

ALL = [
    "launch_tiny_conv",
    "small_batch_infer",
    "sync_mask_loss",
    "pageable_h2d",
    "blocking_pageable_d2h",
    "host_preprocess",
    "dataloader_workers0",
    "layout_nchw_fp16",
    "fp32_matmul",
    "unfused_optimizer",
    "amp_scaler_unfused",
    "sync_and_small_kernels",
    "eval_to_numpy",
    "sync_then_host_work",
    "nonzero_unique_sync",
    "stream_event_wait",
    "item_logging",
    "large_vs_small_batch",
    "healthy_bf16_matmul",
    "healthy_transformer_bf16",
    "healthy_convnet",
    "healthy_convnet_b512",
    "cold_first_step",
    "fusion_elementwise",
    "compile_default_vs_ro",
    "compile_capture",
    # added after the H100 run (tuned versions of two pairs whose fix barely helped there)
    "eval_to_numpy_large",
    "item_logging_large",
    # held out: written after this session's model changes, to check them on programs they were not
    # derived from (recorded as the *_holdout runs)
    "holdout_fusion_bf16",
    "holdout_adamw_loop",
    "holdout_sgd_loop",
    "holdout_compile_infer",
    "holdout_compile_train",
    # second held-out set: written after the staged-copy dispatch factor, the profiler's per-step costs and
    # the compiled-step Python range (recorded as the *_holdout2 runs)
    "holdout2_pageable_conv",
    "holdout2_d2h_features",
    "holdout2_graph_infer",
    "holdout2_compile_conv",
    "holdout2_tokenize_main",
    # third held-out set: written after the no-launch host rule (recorded as the *_holdout3 runs)
    "holdout3_grad_clip_item",
    "holdout3_eval_argmax_cpu",
    "holdout3_healthy_gpu_python",
    # fourth held-out set: the categories on new programs (recorded as the *_holdout4 runs)
    "holdout4_amp_adamw_loop",
    "holdout4_masked_seq_loss",
    "holdout4_numpy_dataset_workers0",
    "holdout4_syncs_then_graph",
    # fifth held-out set: fusion chains after the fused-arithmetic model (recorded as the *_holdout5 runs)
    "holdout5_fusion_arith",
    "holdout5_fusion_gelu_fp16",
    "holdout5_fusion_layernorm",
    # sixth held-out set: after the result-read-by-numpy sync model and the pass-per-repeat fusion range
    # (recorded as the *_holdout6 runs)
    "holdout6_eval_topk_numpy",
    "holdout6_fusion_loop",
    # seventh held-out set: after the per-op fused arithmetic and the stack-read calls (the *_holdout7 runs)
    "holdout7_fusion_erf_cos",
    "holdout7_fusion_swiglu_calls",
    "holdout7_fusion_exp_log",
    # eighth held-out set: layout and fp32 on new programs, the first held out for those kinds (the
    # *_holdout8 runs; the same runs re-record three held-out pairs with a CUDA-graph variant)
    "holdout8_layout_vgg_fp16",
    "holdout8_fp32_encoder",
    # ninth held-out set: repeated elementwise chains after the pass-per-call prior (the *_holdout9 runs)
    "holdout9_fusion_rope_qk",
    "holdout9_fusion_newton_loop",
    # tenth held-out set: a DataLoader whose one worker is the bottleneck; an fp32 conv net that is healthy
    # (cuDNN's default TF32), recorded as the *_holdout10 runs with two added variants of earlier pairs
    "holdout10_loader_one_worker",
    "holdout10_healthy_fp32_convnet",
    # eleventh held-out set: after the replay followed autograd's thread, a large copy to the host was told
    # from a wait for queued work, and a loop waiting for DataLoader workers kept its profiled step (the
    # *_holdout11 runs)
    "holdout11_masked_select_loss",
    "holdout11_seg_eval_numpy",
    "holdout11_loader_two_workers",
    "holdout11_healthy_fed_convnet",
    # twelfth held-out set: after blocking pageable copies kept their staging tail, a replayed step ended
    # when its CPU part and its GPU work were both done, and host_bound said how many workers keep up
    # (the *_holdout12 runs)
    "holdout12_embed_numpy_search",
    "holdout12_loader_workers0_resize",
    "holdout12_multi_item_metrics",
    "holdout12_healthy_bf16_mlp",
    # thirteenth held-out set: after the rest of a step whose host work leaves the CPU ran warm and the
    # reads rule's slowest reader became 0.05 GB/s (the *_holdout13 runs)
    "holdout13_multilabel_f1_numpy",
    "holdout13_vocab_unique_numpy",
    "holdout13_knn_eval_cpu_torch",
    # fourteenth held-out set: after the host's reading of a copied result with torch ops on CPU tensors was
    # priced as those ops' kernel launches once on the GPU (the *_holdout14 runs)
    "holdout14_auc_sort_cpu_torch",
    "holdout14_retrieval_mm_cpu_torch",
    "holdout14_train_topk_acc_cpu_torch",
    # fifteenth held-out set: after the reading's op trees were counted, a step-time rise had to hold, moved
    # kernels added their GPU time to the floor and a pageable copy counted for the warm rule (*_holdout15)
    "holdout15_confusion_cpu_torch",
    "holdout15_pageable_logits_slice",
    "holdout15_quantile_calib_cpu_torch",
    # sixteenth held-out set: copies staged through pageable memory whose fixed steps stay CPU-bound, after the
    # staged copy's dispatch point moved to 1.25x (the *_clean10 runs)
    "holdout16_pageable_feature_cache",
    "holdout16_pageable_h2d_train",
    # seventeenth held-out set: loading of other kinds (Python string work, a numpy STFT) moved into 2, 4 or 8
    # DataLoader workers, after the workers' uneven scaling was fitted on three numpy image loaders
    "holdout17_loader_text_python",
    "holdout17_loader_spectrogram",
    # (added once those two were read: a transform in torch CPU ops, which a worker runs on one thread)
    "holdout17_loader_torch_cpu_resize",
    # eighteenth held-out set: loading and preparation whose Python is mostly C built-ins doing real work (json),
    # mostly Python frames (transform objects), or a mix (regex parsing on the main thread), after with_stack's
    # Python events were costed as frames and built-ins apart
    "holdout18_loader_json_records",
    "holdout18_loader_python_transforms",
    "holdout18_regex_features_main",
    # twenty-first held-out set: after fp32_matmul learned cuDNN's FP32 convolutions and the fp16-only advice
    # (Volta/Turing): a conv net with cuDNN's TF32 turned off, and a compiled bf16 MLP that must stay healthy
    "holdout21_fp32_convnet_notf32",
    "holdout21_healthy_compiled_mlp",
    # twenty-second held-out set: an unfused SGD (every earlier optimizer pair was Adam), a per-step
    # torch.cuda.synchronize() for a step timer with Python bookkeeping after it, and a healthy ViT with SDPA
    "holdout22_sgd_foreach_off",
    "holdout22_sync_step_timer",
    "holdout22_healthy_vit_bf16",
    # twenty-third held-out set: channels_last on a bf16 bottleneck ResNet (training) and on its fp16 inference
    # (cuDNN's batch norm inference kernels), and torch.cuda.empty_cache() after every step
    "holdout23_layout_resnet_bf16",
    "holdout23_layout_eval_fp16",
    "holdout23_empty_cache_step",
    # twenty-fourth held-out set: the bottleneck ResNet in fp32 on TF32 (PyTorch's fp32 batch norm), and
    # torch.cuda.empty_cache() after every batch of a transformer's inference loop
    "holdout24_layout_resnet_fp32",
    "holdout24_empty_cache_eval",
    # twenty-fifth held-out set: causal attention written out by hand (scale, masked_fill, softmax) ->
    # F.scaled_dot_product_attention, in inference (the program any model is fitted on) and in training
    "holdout25_attention_infer",
    "holdout25_attention_train",
    # twenty-sixth held-out set: written-out attention without a causal mask (an additive padding mask, and
    # none at all in fp16), which the twenty-fifth set's fit did not see
    "holdout26_attention_padded_infer",
    "holdout26_attention_vit_fp16",
    # twenty-seventh held-out set: a per-tensor weight EMA over state_dict() outside the optimizer (timm
    # ModelEmaV2 style), and every parameter's gradient norm read with .item() each step (74 syncs)
    "holdout27_ema_state_dict",
    "holdout27_grad_norm_items",
    # twenty-eighth held-out set: the update-loop rule on programs it was not found on: AveragedModel with a
    # per-tensor avg_fn on a ResNet (buffers too), and the ModelEmaV2 loop in a GPU-bound step
    "holdout28_ema_averaged_model",
    "holdout28_ema_gpu_bound",
    # twenty-ninth held-out set: per-tensor loops where the rule had not looked: a weight EMA under gradient
    # accumulation (four backwards a step), and gradient clipping one tensor at a time before the optimizer
    "holdout29_ema_grad_accum",
    "holdout29_clip_per_tensor",
    # thirtieth held-out set: greedy decoding with a static KV cache (a generate loop), syncing every token: an
    # "all finished?" check on a small model, each token read with .tolist() on a larger one
    "holdout30_decode_eos_check",
    "holdout30_decode_tolist",
    # thirty-first held-out set: a compiled training step whose forward branches on .item() (a graph break and a
    # sync), and a GPU-bound conv net fed by a side-stream prefetcher from pinned memory (healthy)
    "holdout31_compiled_item_branch",
    "holdout31_healthy_prefetch_convnet",
    # thirty-second held-out set: after the sync fix learned to merge the compiled regions a graph break splits: a
    # break once, outside any loop (`if pad.any():` in a compiled training step), and one per block in compiled
    # inference (a finite check after every block)
    "holdout32_compiled_mask_any",
    "holdout32_compiled_nan_assert",
    # thirty-third held-out set: after the merge was refined on those two: a break once in compiled inference (a
    # clamp decided on the host), and one at the end of a compiled loss that branches on loss.item()
    "holdout33_compiled_clamp_item",
    "holdout33_compiled_loss_spike_guard",
    # thirty-sixth held-out set: fusion chains of slow (generic 16-bit) kernels, calls through a helper
    "holdout36_fusion_affine_nchw_bf16",
    "holdout36_fusion_qk_rmsnorm_calls",
    # thirty-seventh held-out set: a GPT training step with three faults, each fixed, then the plan with a graph
    "holdout37_gpt_small_plan",
    "holdout37_gpt_medium_plan",
    # thirty-eighth held-out set: a main-process numpy loader in front of an fp32 patch MLP, two faults that hide
    # each other: one block (the loader is the step) and eight (the fp32 GPU work is), each fix alone and both
    "holdout38_patch_loader_host",
    "holdout38_patch_loader_gpu",
    # thirty-ninth held-out set: fp32_matmul's per-GEMM TF32 law on GEMMs it was not fitted on: ~90 us ones in fp32
    # inference of a residual MLP, and batched ones (torch.bmm over 8 experts) in fp32 MoE training
    "holdout39_fp32_mlp_infer",
    "holdout39_fp32_moe_bmm_train",
    # the fortieth held-out set (pre-registered 2026-12-03): models built from the libraries users bring
    "holdout40_hf_gpt2_unfused_adamw",
    "holdout40_timm_vit_fp32",
    "holdout40_timm_resnet50_bf16_healthy",
    "holdout40_hf_bert_token_mask_loss",
    # the forty-first held-out set (pre-registered 2026-12-04): library models, each with one fault, and a healthy one
    "holdout41_hf_gpt2_eager_attention",
    "holdout41_timm_vit_tiny_infer_b1",
    "holdout41_timm_resnet18_pageable_batches",
    "holdout41_timm_vit_base_bf16_healthy",
    # its unmeasured top finding measured (the ViT-B under torch.compile; added once the set was read)
    "holdout41_timm_vit_base_bf16_compile",
    # the forty-second held-out set (pre-registered 2026-12-04): library models, each with one fault
    "holdout42_hf_llama_loss_item_accum",
    "holdout42_timm_effnet_loader_workers0",
    "holdout42_timm_mobilenetv3_infer_graph",
    "holdout42_hf_llama_bf16_compile",
    # the forty-third held-out set (pre-registered 2026-12-04): eager library models -> torch.compile (default mode)
    "holdout43_hf_gpt2_small_compile",
    "holdout43_hf_bert_tagger_compile",
    "holdout43_timm_resnet18_infer_compile",
    "holdout43_timm_convnext_train_compile",
    # a Python-dense step for the profiler-cost calibration (the *_calib runs, calibrate.py)
    "calib_python_features",
]
