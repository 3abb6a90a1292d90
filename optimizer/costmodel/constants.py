"""Every efficiency constant of the cost model, with its source. A few per GPU family and interconnect; never one
per calibration record. Values marked "calibrated" were fitted once to the published runs in
accuracy/data/published_runs.json (benchmarks/model_accuracy.py prints the fit)."""

from __future__ import annotations

from optimizer.spec.calibration import FRAGMENTATION_FRACTION as FRAGMENTATION_FRACTION

# ---- interconnect --------------------------------------------------------------------------------------------
# Achievable bus bandwidth as a fraction of the per-direction line rate.
NVLINK_EFFICIENCY = 0.80  # H100 ring busbw ~370 of 450 GB/s [NT #212]; A100 235 of 300 GB/s [ST]
PCIE_EFFICIENCY = 0.80  # pairwise copies reach 80-88% of spec [ST]
NIC_EFFICIENCY = 0.92  # NDR 400G: 46-48 GB/s of 50 [NT #290]; DGX-A100 8x200G: 192 of 200 GB/s [NC #1576]

# NCCL protocol latencies in seconds: (base, per NVLink/PCIe hop, per network hop) [NC tuning.cc, formulas C1],
# and the share of link bandwidth each protocol delivers: LL sends 4 data bytes per 8-byte word (0.5), LL128 120
# data bytes per 128-byte line (0.9375), Simple the full rate [NC src/device/prims_ll*.h design].
# The cost of a collective is the cheapest protocol, as NCCL's tuner picks it [NC tuning.cc].
NCCL_PROTOCOLS: tuple[tuple[float, float, float, float], ...] = (
    # base,   intra hop, net hop, bandwidth share
    (6.6e-6, 0.6e-6, 2.7e-6, 0.5),  # LL
    (14e-6, 1.9e-6, 4.0e-6, 0.9375),  # LL128
    (8.4e-6, 3.4e-6, 14e-6, 1.0),  # Simple
)

# A collective that runs under compute takes SMs and memory bandwidth from it: NCCL runs one CTA per channel on
# its own SM (an all-gather on H100 launched 24 of 132 SMs, 18%, stretching a one-wave GEMM [NVIDIA forums
# 'Compute-Communication Overlap Causes Severe GEMM Performance Degradation', 2025]; DeepSeek-V3 reserved 20 of
# 132 SMs for its all-to-all [DeepSeek-V3 report §3.2.2]), and overlapped GEMMs ran 18.9% slower on average
# (A100, H100, MI250, MI210; up to 40%) [Lee et al. 2025, arXiv 2507.03114, 'Characterizing Compute-Communication
# Overlap']. So hiding a collective of time t under compute still costs OVERLAP_COMPUTE_SLOWDOWN x t.
# TP-comm overlap (Transformer Engine userbuffers) pays it too. Its own SM share is smaller (ring exchanges on the
# copy engines, reduce-scatters and backward bulk overlaps on 16 SMs [TE d0067d0 pytorch/module/base.py
# initialize_ub get_default_config]), but it also splits each overlapped GEMM into tp (ring exchange) or 4
# (pipeline) chunks (num_splits), smaller GEMMs that lose efficiency. Priced with the SM share alone (16/132 for
# half the collectives) the H100 records' median error went 3.7% -> 5.0% and the picks left NVIDIA's TP (tp 8 over
# tp 4 for GPT-3 175B on 512 H100 and Llama-2-70B on 64 H100), so the measured average stands for both.
OVERLAP_COMPUTE_SLOWDOWN = 0.19

# ---- compute -------------------------------------------------------------------------------------------------
# End-to-end GEMM efficiency = GPU's MAMF fraction [ST] x a framework factor per family (kernel mix of a real
# training/serving step vs. the best-case matmul). Calibrated on the published runs (Narayanan 2021, Korthikanti
# 2022 on A100; Megatron-Core 2024 README on H100); other families take the Hopper value (no public runs in
# optimizer/data to fit them - stated as an assumption in every estimate's notes).
# Hopper refitted 2026-11 once overlapped collectives slow the compute under them (OVERLAP_COMPUTE_SLOWDOWN): 0.73
# (0.70 before that term). On the 33 dense H100 training records (Megatron-Core table, MosaicML FSDP, NeMo 24.12,
# Megatron-Bridge, NeMo AutoModel): signed median +0.3%, |error| median 3.7%.
# Volta takes Ampere's factor rather than a fit of its own: the same pre-Hopper tensor-core kernels (mma.sync,
# cuBLAS/CUTLASS; no wgmma) under the same Megatron code; the two V100 records (Megatron-LM v1.0 on a DGX-2H,
# megatron2019_v100_model_parallel) check it.
FRAMEWORK_FACTOR: dict[str, float] = {"volta": 0.80, "ampere": 0.80, "hopper": 0.73}
FRAMEWORK_FACTOR_DEFAULT = 0.72

# torchao's rowwise float8 recipe (torchtitan fp8_recipe rowwise) runs its FP8 GEMMs as rowwise-scaled
# torch._scaled_mm (cuBLASLt / CUTLASS with a scale per row and per column) plus per-row amax reductions, slower than
# the tensorwise recipe ("tensorwise (fastest), rowwise, rowwise_with_gw_hp (most accurate)"); its FSDP all-gathers
# stay bf16 [pytorch/ao b795037 torchao/float8/README.md]. Factor on the FP8 GEMM rate against tensorwise, fitted on
# that README's Llama3-8B 8 x H100 pair: rowwise 6,768 vs tensorwise 7,689.5 tok/s/GPU (the tensorwise row's float8
# all-gather is not priced: within one NVLink node the gathers hide under compute).
TORCHAO_ROWWISE_FP8_RATE = 0.80  # calibrated 2026-11 (see above): fitted 0.801

# FP8 matmul reaches a smaller share of its peak than BF16: H100 FP8 MAMF 1403/1979 = 0.71 vs BF16 0.80 [ST].
FP8_MAMF_RATIO = 0.71 / 0.80

# Small GEMMs run below the matmul ceiling. Calculon's curve: 0.95 at >=128 GFLOP per op, 0.9 at >=16, 0.6 at
# >=1 [CAL systems/*.json]; used relative to its top (so 1.0 at >=128 GFLOP), log-interpolated between points.
GEMM_SIZE_CURVE: tuple[tuple[float, float], ...] = (
    (1e8, 0.30),
    (1e9, 0.6 / 0.95),
    (16e9, 0.9 / 0.95),
    (128e9, 1.0),
)

# A GEMM's rate falls with its reduction depth K (fewer MMA steps per output tile to amortise its prologue and
# epilogue): DeepGEMM's H100 FP8 normal GEMMs at 4,096 rows reach 590, 990, 1,025, 1,304 and 1,358 TFLOP/s at
# K = 512, 1,536, 2,048, 7,168 and 16,384 (README performance table; CUTLASS 3.6 within 10% of each), which
# r = r_max K / (K + 718) fits within 3% (compute.depth_factor). Applied to the routed experts' fc2 against fc1.
GEMM_DEPTH_HALF = 718.0

# A GEMM near its ridge point is slower than the larger of its compute and memory times: combine them as a p-norm
# (compute.roofline_time) with p = 2, which reproduces the fall of DeepGEMM's published H100 FP8 grouped-GEMM rates
# from 4,096 to 256 rows per expert (README performance tables) that a plain maximum misses.
ROOFLINE_SMOOTHING_P = 2.0

# ---- element widths -------------------------------------------------------------------------------------------
# Activations, weights and gradients on the wire in 16-bit [K22 §4: 16-bit activations; Megatron bf16 training], and
# FP8 weight copies (Transformer Engine) / FP8 primary weights [MLM --fp8-param-gather]. Bytes per element.
BF16_BYTES = 2
FP8_BYTES = 1

# HBM-bound kernels (norms, activations, softmax, optimizer) reach 90% of peak memory bandwidth [CAL, >=100 MB].
HBM_EFFICIENCY = 0.90

# Adam step, bytes moved per parameter: read fp32 master, m, v, grad (16), write master, m, v (12), write the
# bf16 weight (2), plus a grad-norm pass reading the fp32 grad (4) = 34; memory-bound [CAL layers.py].
ADAM_BYTES_PER_PARAM = 34.0

# Kernel launches per transformer layer in a forward pass (~12 kernels: 2 norms, QKV, rotary, attention, out
# proj, 2 residual adds, up/gate, activation, down; [MLM transformer_layer.py]) at ~4 us each without CUDA graphs
# [NVIDIA "Getting started with CUDA Graphs" blog: launch overheads of a few microseconds per kernel].
KERNELS_PER_LAYER = 12
KERNEL_LAUNCH_S = 4e-6
# Host time to issue one eager MoE layer's kernels after its dispatcher's device-to-host sync, forward + backward
# (a third forward), per micro-batch. Megatron's dispatchers synchronise host and device inside every MoE layer
# (alltoall: cuda_sync_point for the all-to-all's split sizes; flex / DeepEP: the received-token counts;
# moe/token_dispatcher.py, Megatron-LM d98e8a6), after which the GPU runs only what the host issues: router
# remainder, permutes, the grouped GEMMs with their FP8 quantisations, activation, combine (Megatron MoE README,
# "CPU Overhead Bottleneck: gaps between GPU kernels where CPU cannot launch kernels fast enough"; dropless MoE
# layers cannot be captured in per-layer CUDA graphs, only full-iteration graphs with padded capacity remove it).
# Exposed where the GPU's routed-expert work is shorter (costmodel/training.py). Calibrated 2026-11 on the H100 MoE
# records (megatron_bridge_h100_fp8_moe: Qwen3-30B-A3B on 16 GPUs measured 29.7 s, 16.6 s without the term), about
# 240 kernel launches at ~20 us each; Megatron-Bridge's older-container Blackwell rows (benchmarks/bridge_summary.py)
# show the same 3-5 ms per MoE layer and micro-batch on B200 / GB200 / B300 / GB300 whatever the micro-batch size.
MOE_EAGER_HOST_S = 0.005  # calibrated 2026-11
# FP8 GEMMs need their input cast to FP8 first: one extra kernel per GEMM input (QKV, out proj, up, down)
# [TE fp8_primer: activations are quantized before each FP8 GEMM].
FP8_CAST_KERNELS_PER_LAYER = 4

# ---- memory --------------------------------------------------------------------------------------------------
# CUDA context (~0.3-0.7 GB with lazy loading) plus NCCL communicator buffers: 1 GiB [PT #107667, #28113].
CUDA_CONTEXT_BYTES = 1.0 * 2**30
# Allocator fragmentation: FRAGMENTATION_FRACTION (defined beside the calibration that may move it).
# A training run's allocator slack stops at 8 GiB (10% of an 80 GB GPU, so H100 / A100-80GB plans are unchanged).
# Training jobs run the caching allocator with expandable segments (Megatron-Bridge perf recipes and torchtitan's
# run_train.sh set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True), whose slack follows the model's tensor sizes,
# not the device's capacity. Bounds: torchtitan's reserved peaks on 96 GB H100 lie ~9 GB above the predicted
# allocated peak (the torchtitan2412_h100_memory records); Megatron-Bridge's GB200 recipes Llama 3.1 405B FP8
# tp4 pp16 vp4 and Llama 3 70B FSDP 64 with 40 layers offloaded run with at most 12.8 and 9.9 GB between the
# predicted allocated peak and 186 GiB (performance-summary 26.04-26.06); 10% of 186 GiB (20 GB) rejected both.
# A fitted fraction (cluster calibration from the user's own reserved and allocated peaks) is used as fitted.
TRAINING_SLACK_CAP_BYTES = 8.0 * 2**30
# CUDA graphs captured by serving engines hold 1-3 GiB per GPU [VL startup log]: 1.5 GiB for inference.
CUDA_GRAPHS_BYTES = 1.5 * 2**30

# Fused (flash) attention core, share of dense BF16 peak in a training step, (forward, backward), per kernel
# generation (TrainingWorkload.attention_kernel) and GPU family:
# - fa3, Hopper: FlashAttention-3 / cuDNN fused attention at head dim 128 reach 600-740 TFLOP/s forward and about
#   450-550 backward of 989 [Shah et al. 2024, FlashAttention-3, Fig. 5-7] -> (0.60, 0.46), taking the low ends for
#   causal masks. Blackwell Ultra (B300, GB300) and the other families take the Hopper pair.
# - fa3, Blackwell (B200, GB200): twice Hopper's tensor-core rate per SM with the same special-function (exp) rate,
#   so the softmax between the two attention GEMMs stalls the tensor cores [NVIDIA technical blog, "Making Softmax
#   More Efficient with NVIDIA Blackwell Ultra": Blackwell Ultra doubles the SFU throughput for this reason]. No
#   kernel figure is published; 0.8 x the Hopper pair -> (0.48, 0.37) fits NeMo 25.04's long-sequence table (Llama
#   3 8B FP8 on B200, 8K-1M tokens: median 2.4%, max 6.1%; the Hopper pair left it 10-20% fast) and best fits
#   Megatron-Bridge's dense Blackwell rows (benchmarks/bridge_summary.py: non-FSDP median 2.8% at 0.8, 3.2% at
#   1.0, 4.0% at 0.7). The GB300 records fit the Hopper pair (Blackwell Ultra above).
# - fa2, Hopper: FlashAttention-2 reaches "only 35% utilization" of H100 [Shah et al. 2024, abstract; Fig. 5: 333
#   TFLOP/s causal at 8k] and about 280 backward [ibid. Fig. 7] -> (0.34, 0.28). NeMo 24.03's long-sequence table
#   (Llama 2 7B FP8 on 4-1,024 H100 at 4k-1M tokens, CP 1-32; records nemo2403_h100_long_sequence) fits this pair
#   within -3..+6% at every length; the fa3 pair leaves it 12-37% fast.
# - fa2, Ampere: FlashAttention-2 reaches 50-73% forward and about 60% backward of 312 [Dao 2023, FA-2 §4.1]
#   -> (0.60, 0.55). FlashAttention-3 needs Hopper's wgmma / TMA, so Ampere runs fa2 whatever is asked.
FLASH_ATTENTION_EFFICIENCY: dict[str, dict[str, tuple[float, float]]] = {
    "fa3": {"hopper": (0.60, 0.46), "blackwell": (0.48, 0.37)},
    "fa2": {"hopper": (0.34, 0.28), "ampere": (0.60, 0.55)},
}
# The family whose pair stands in for families without their own entry.
FLASH_ATTENTION_FALLBACK_FAMILY = "hopper"
# Those shares hold for causal sequences of FLASH_ATTENTION_REFERENCE_LENGTH tokens. Shorter sequences run slower
# (fewer tiles per head, and under a causal mask more of them partly masked); blocks without a mask run faster.
# Forward TFLOP/s on H100 SXM5 at head dim 128 for sequence lengths 512 ... 16k, per kernel generation [Shah et al.
# 2024, FlashAttention-3, Fig. 5: FlashAttention-3 and FlashAttention-2 with and without causal mask; FA-2's own
# paper shows the same rise with length on A100 (Dao 2023, Fig. 4)]. The backward is taken to follow the
# forward's shape (the paper's backward figure has no causal panel).
FLASH_ATTENTION_LENGTHS: tuple[int, ...] = (512, 1024, 2048, 4096, 8192, 16384)
FLASH_ATTENTION_LENGTH_CURVE: dict[str, dict[bool, tuple[float, ...]]] = {
    "fa3": {True: (292, 423, 521, 579, 602, 616), False: (497, 565, 625, 638, 646, 648)},
    "fa2": {True: (191, 260, 298, 319, 333, 335), False: (309, 350, 362, 368, 370, 370)},
}
FLASH_ATTENTION_REFERENCE_LENGTH = 8192

# ---- serving -------------------------------------------------------------------------------------------------
# Paged decode attention reads KV blocks scattered over the cache (16-32 tokens per block) and reduces split-K
# partials; it may reach a smaller share of HBM bandwidth than the streaming kernels of HBM_EFFICIENCY. Calibrated
# on the serving rows of accuracy/data/serving_runs.json (benchmarks/serving_fit.py prints the grid fit). Refit
# 2026-11 once each kernel class got its own roofline (costmodel/inference.py): 1.0, i.e. the paged kernels stream
# at HBM_EFFICIENCY like the others (0.70 had stood in for the attention that the per-layer roofline hid under
# compute-bound GEMMs).
DECODE_ATTENTION_HBM_SHARE = 1.0  # calibrated 2026-11 (grid 0.6-1.0 x host 0-10 ms)
# Host time per engine iteration that the GPU waits for (scheduling, input preparation, sampling, detokenisation
# hand-off), seconds. The engines overlap part of it (SGLang's overlap scheduler [SGLang v0.4 blog, Dec 2024];
# vLLM V1's async scheduling; TensorRT-LLM's overlap scheduler), so the exposed part is per engine; calibrated as
# above. A continuous-batching iteration pays it; a static batch (TensorRT-LLM v0.6 gptSessionBenchmark) has no
# scheduler and does not (costmodel/inference.py).
# TensorRT-LLM's executor is C++ with the overlap scheduler: 2 ms fits its rows (median 6.6%, max 25%; 6 ms gave
# 9.7%); vLLM and SGLang (Python schedulers) 6 ms.
ENGINE_ITERATION_OVERHEAD_S: dict[str, float] = {"vllm": 0.006, "sglang": 0.006, "trtllm": 0.002}  # calibrated 2026-11
# TensorRT-LLM's TensorRT engine backend (InferenceWorkload.trtllm_backend "tensorrt"; the only backend before v0.19):
# the C++ runtime enqueues the built engine without a Python step, so its exposed host time is taken as 0; the
# v0.6.1 gptSessionBenchmark rows (static batches on TensorRT engines) fit at 0 (benchmarks/serving_fit.py grid).
TRTLLM_TENSORRT_ITERATION_OVERHEAD_S = 0.0
