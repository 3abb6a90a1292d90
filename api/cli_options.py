"""The options of `meshplan estimate` and `meshplan plan`, declared once: typer option aliases, and the option groups
(api/cli_option_groups.py) a command's signature names to take several of them. Each option's help gives its unit."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer

CvOpt = Annotated[float | None, typer.Option(help="Length spread, standard deviation / mean (SLA plans).")]
ObjectiveOpt = Annotated[
    str | None,
    typer.Option(
        help="Training: step_time (default), cost (needs pool prices) or goodput (wall time per useful step after "
        "checkpoints, failures and restarts). Inference: latency or throughput."
    ),
]
FrameworkOpt = Annotated[
    str,
    typer.Option(
        help="Training framework: megatron, deepspeed, torchtitan; plan also takes auto (each, keep the best)."
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON object.")]
CalibrationOpt = Annotated[
    Path | None,
    typer.Option(help="A cluster calibration (JSON or YAML: pools -> constants, as GET .../calibrations gives)."),
]


@dataclass(frozen=True)
class ReliabilityOptions:
    """Training's failure model (optimizer/spec/reliability.py), applied to every pool of the cluster (None: the
    inventory's, or the sourced defaults)."""

    failure_rate: Annotated[
        float | None,
        typer.Option(
            help="Job interruptions per 1,000 node-days, split over GPU, network, host and software as the pool's "
            "own rates (default: Llama 3 405B's 3.79)."
        ),
    ] = None
    checkpoint_gbps: Annotated[
        float | None,
        typer.Option(help="Checkpoint write and read bandwidth of one node to the file system, GB/s."),
    ] = None
    spares: Annotated[
        int | None, typer.Option(help="Healthy nodes each pool holds back from the plan as hot spares.")
    ] = None
    recovery: Annotated[
        str | None,
        typer.Option(
            help="How a stopped job comes back: manual (a person relaunches it), automatic (default) or elastic "
            "(in-job recovery)."
        ),
    ] = None
    collective_timeout: Annotated[
        float | None,
        typer.Option(help="The framework's collective (NCCL watchdog) timeout, seconds (default 600: PyTorch's)."),
    ] = None
    checkpoint_interval: Annotated[
        float | None,
        typer.Option(help="A fixed checkpoint interval, seconds of training (default: the optimum, shown beside)."),
    ] = None
    checkpoint_tier: Annotated[
        str | None,
        typer.Option(help="Where a checkpoint goes first: remote (default), local (node disk) or memory (peer copy)."),
    ] = None
    restart_history: Annotated[
        Path | None,
        typer.Option(
            help="The job's restart history: Slurm `sacct --parsable2` records (JobID|State|Start|End|...) of its "
            "runs; its measured rates and times replace the defaults and narrow the goodput band."
        ),
    ] = None
    training_log: Annotated[
        Path | None,
        typer.Option(
            help="A Megatron-LM training log of the run (its jobs' logs in order): its restarts, their downtime and "
            "the steps redone set the rate and relaunch time, and its measured goodput is printed beside the "
            "prediction."
        ),
    ] = None


@dataclass(frozen=True)
class Target:
    """What to place where: the model and the cluster (required)."""

    model: Annotated[str, typer.Option(help="Preset name, HuggingFace config.json or model.yaml.")]
    cluster: Annotated[str, typer.Option(help="Preset (dgx-h100, dgx-h100:16 for 16 nodes) or cluster.yaml.")]


@dataclass(frozen=True)
class WorkloadShape:
    """What runs: the mode and its sizes (None: not given; the mode says which it needs)."""

    mode: Annotated[str, typer.Option(help="training or inference.")] = "training"
    gbs: Annotated[int | None, typer.Option(help="Global batch, sequences (training).")] = None
    seq_len: Annotated[int | None, typer.Option(help="Sequence length, tokens (training).")] = None
    batch: Annotated[int | None, typer.Option(help="Concurrent sequences (inference).")] = None
    prompt_len: Annotated[int | None, typer.Option(help="Prompt tokens (inference).")] = None
    output_len: Annotated[int | None, typer.Option(help="Generated tokens (inference).")] = None


@dataclass(frozen=True)
class Numerics:
    """How it computes: precision and the training stack's kernels (None: the framework's default)."""

    precision: Annotated[str, typer.Option(help="bf16, fp16 or fp8.")] = "bf16"
    grad_dtype: Annotated[
        str,
        typer.Option(
            help="Training: dtype of the accumulated gradients, fp32 (Megatron's default main grads) or bf16 "
            "(--grad-reduce-in-bf16 / FSDP reduce_dtype)."
        ),
    ] = "fp32"
    fused_loss: Annotated[
        bool | None,
        typer.Option(
            "--fused-loss/--unfused-loss",
            help="Training: the loss is a fused cross entropy (no fp32 logits beside their gradient) or the unfused "
            "fp32 one; unset: the framework's default (torchtitan eager: unfused).",
        ),
    ] = None
    fp8_param_gather: Annotated[
        bool,
        typer.Option(
            "--fp8-param-gather",
            help="Training with --precision fp8 on Megatron: FP8 primary weights (no bf16 copy, FP8 all-gather), as "
            "Megatron-Bridge's FP8 recipes run.",
        ),
    ] = False
    precision_aware_optimizer: Annotated[
        bool,
        typer.Option(
            "--precision-aware-optimizer",
            help="Training with --precision bf16 on Megatron: --use-precision-aware-optimizer (fp32 master weights "
            "kept as 16-bit remainders of the bf16 weights, 2 B per parameter less), as NeMo's BF16 performance "
            "recipes run.",
        ),
    ] = False
    attention_kernel: Annotated[
        str | None,
        typer.Option(
            "--attention-kernel",
            help="Training: fused-attention kernel generation, fa3 (FlashAttention-3 / cuDNN on Hopper and newer) or "
            "fa2 (FlashAttention-2 class: flash-attn 2.x, stacks before mid-2024); unset: the framework's default.",
        ),
    ] = None
    framework_version: Annotated[
        str | None,
        typer.Option(
            "--framework-version",
            help="Training: the framework's release, a NeMo / Megatron-Bridge container (25.09) for megatron, the "
            "package version (0.2.1) for torchtitan and deepspeed; an unknown or newer one is priced as the nearest "
            "known release and shown as novel (optimizer/frameworks/releases.py). Unset: current defaults.",
        ),
    ] = None
    fp8_recipe: Annotated[
        str | None,
        typer.Option(
            "--fp8-recipe",
            help="Training with --precision fp8 on torchtitan: torchao's float8 recipe, tensorwise or rowwise (FP8 "
            "GEMMs slower, bf16 all-gathers); unset: the release's default (tensorwise through 0.2.2).",
        ),
    ] = None
    cuda_graphs: Annotated[
        str | None,
        typer.Option(
            "--cuda-graphs",
            help="Training: CUDA graphs the stack captures, none, layers (attention, MoE router and preprocess; "
            "dropless experts stay eager) or full_iteration (Megatron --cuda-graph-impl full_iteration); unset: none.",
        ),
    ] = None


@dataclass(frozen=True)
class ServingEngine:
    """Serving (`estimate` and `plan`): the engine and the stored dtypes (None: the engine's default)."""

    engine: Annotated[str | None, typer.Option(help="Serving engine: vllm (default), sglang, trtllm.")] = None
    spec_tokens: Annotated[
        int,
        typer.Option(
            help="Speculative decoding (MTP / EAGLE): draft tokens per sequence per iteration; 0 = off. Needs "
            "--acceptance-rate."
        ),
    ] = 0
    acceptance_rate: Annotated[
        float | None,
        typer.Option(help="Speculative decoding: probability a drafted token is accepted, in [0, 1)."),
    ] = None
    engine_version: Annotated[
        str | None,
        typer.Option(
            help="Engine release, e.g. 0.11.0: its defaults as released; an unknown release is priced as the nearest "
            "known one with wider intervals. Default: the newest defaults."
        ),
    ] = None
    kv_cache_dtype: Annotated[str | None, typer.Option(help="KV-cache type: bf16, fp16, fp8 (inference).")] = None
    weight_dtype: Annotated[str | None, typer.Option(help="Stored weights: bf16, fp16, fp8, int4 (inference).")] = None
    trtllm_backend: Annotated[
        str | None,
        typer.Option(help="TensorRT-LLM backend: pytorch (default since v0.19) or tensorrt (a built engine)."),
    ] = None
    max_seqs: Annotated[
        int | None,
        typer.Option(
            help="Most sequences per iteration, per replica (vLLM --max-num-seqs, SGLang --max-running-requests, "
            "TensorRT-LLM max_batch_size); default: the engine's."
        ),
    ] = None
    memory_fraction: Annotated[
        float | None,
        typer.Option(
            help="Engine memory fraction in (0, 1] (vLLM --gpu-memory-utilization, SGLang --mem-fraction-static, "
            "TensorRT-LLM free_gpu_memory_fraction); default: the engine's."
        ),
    ] = None
    max_batched_tokens: Annotated[
        int | None,
        typer.Option(
            help="Tokens per iteration (vLLM --max-num-batched-tokens, SGLang --chunked-prefill-size, TensorRT-LLM "
            "max_num_tokens); default: the engine's."
        ),
    ] = None
    chunked_prefill: Annotated[
        bool | None,
        typer.Option(
            "--chunked-prefill/--no-chunked-prefill", help="Split long prompts into chunks of the token budget (on)."
        ),
    ] = None
    enforce_eager: Annotated[
        bool,
        typer.Option("--enforce-eager", help="No CUDA graphs: every decode step launches its kernels (vLLM's name)."),
    ] = False
    cuda_graph_max_batch: Annotated[
        int | None,
        typer.Option(
            help="Largest decode batch per rank captured in a CUDA graph, sequences (vLLM max_cudagraph_capture_size, "
            "SGLang --cuda-graph-max-bs, TensorRT-LLM cuda_graph_config.max_batch_size); default: the engine's."
        ),
    ] = None


@dataclass(frozen=True)
class ServingOptions:
    """`plan`'s serving: the SLA targets and the request mix (None: the planner's default)."""

    rate: Annotated[
        float | None,
        typer.Option(
            help="Requests/s the fleet must serve (SLA plan; objective gpus/cost); estimate prints TTFT/TPOT mean, "
            "median, p90, p99 at this rate."
        ),
    ] = None
    ttft_ms: Annotated[float | None, typer.Option("--ttft-ms", help="TTFT target, p90, ms (SLA plan).")] = None
    tpot_ms: Annotated[float | None, typer.Option("--tpot-ms", help="TPOT target, mean, ms (SLA plan).")] = None
    disaggregation: Annotated[
        str | None, typer.Option(help="SLA plans: auto (default), on (prefill/decode instances), off.")
    ] = None
    prompt_len_cv: CvOpt = None
    output_len_cv: CvOpt = None
    workload_trace: Annotated[
        Path | None,
        typer.Option(
            "--workload-trace",
            help="Your own requests, JSONL: a Mooncake / aiperf mooncake_trace (timestamp ms, input_length, "
            "output_length) or a `vllm bench serve --save-result --save-detailed` file; the latency simulation runs "
            "them at their own times (or at --rate / --concurrency). --prompt-len / --output-len default to its means.",
        ),
    ] = None
    length_distribution: Annotated[
        str | None,
        typer.Option(
            "--dataset",
            help="Draw each request's prompt and output lengths from a dataset's measured distribution at the "
            "--prompt-len / --output-len means: sharegpt, openchat-sharegpt4, arxiv-summarization, azure-conv-2023, "
            "azure-code-2023, or random / sonnet as vllm bench serve draws them "
            "(optimizer/costmodel/request_lengths.py).",
        ),
    ] = None
    burstiness: Annotated[
        float | None,
        typer.Option(help="Gamma arrivals at --rate of this shape (vllm bench serve --burstiness; 1 = Poisson)."),
    ] = None


ConcurrencyOpt = Annotated[
    int | None,
    typer.Option(
        help="Inference: closed loop of this many users (each sends its next request when the previous one "
        "finishes): prints TTFT/TPOT mean, median, p90, p99. With --rate instead: open loop at that rate."
    ),
]


@dataclass(frozen=True)
class ParallelOptions:
    """`estimate`'s parallel configuration: degrees, micro-batch, schedule, ZeRO and recompute."""

    tp: Annotated[int, typer.Option(help="Tensor-parallel degree.")] = 1
    pp: Annotated[int, typer.Option(help="Pipeline-parallel degree.")] = 1
    dp: Annotated[
        int,
        typer.Option(
            help="Data-parallel degree. Serving an MoE model with ep = tp x dp (or etp = tp x dp): attention-DP ranks "
            "sharing the experts (trtllm enable_attention_dp, sglang --enable-dp-attention, vllm --data-parallel-size)."
        ),
    ] = 1
    cp: Annotated[int, typer.Option(help="Context-parallel degree.")] = 1
    ep: Annotated[int, typer.Option(help="Expert-parallel degree.")] = 1
    etp: Annotated[
        int | None,
        typer.Option(
            help="Expert tensor-parallel degree (default: tp). Serving: tp x dp with ep 1 shards the experts over "
            "every attention-DP rank's GPUs (no EP)."
        ),
    ] = None
    vp: Annotated[int, typer.Option(help="Virtual stages per pipeline rank.")] = 1
    mbs: Annotated[int, typer.Option(help="Micro-batch size.")] = 1
    schedule: Annotated[str | None, typer.Option(help="gpipe, 1f1b, interleaved-1f1b, zb-h1.")] = None
    sequence_parallel: Annotated[bool, typer.Option("--sp", help="Sequence parallelism.")] = False
    zero_stage: Annotated[int, typer.Option("--zero", help="ZeRO stage 0-3 (1 = distributed optimizer).")] = 0
    shard_group: Annotated[
        int | None,
        typer.Option(
            "--shard-group",
            help="Training with --zero >= 1: data-parallel replicas (a divisor of --dp) per sharding group, the states "
            "replicated across groups (torchtitan HSDP, DeepSpeed MiCS, Megatron --num-distributed-optimizer-instances "
            "dp/N); unset: all of dp.",
        ),
    ] = None
    shard_scope: Annotated[
        str,
        typer.Option(
            "--shard-scope",
            help="What --shard-group partitions: states, or weights (DeepSpeed ZeRO++ hpZ: a secondary weight "
            "partition for the backward's gathers, --zero 3).",
        ),
    ] = "states"
    recompute: Annotated[str, typer.Option(help="none, selective or full.")] = "none"
    recompute_modules: Annotated[
        str | None,
        typer.Option(
            help="With --recompute selective: Megatron --recompute-modules, comma-separated (core_attn, layernorm, "
            "mla_up_proj, moe_act, mlp, moe, shared_experts)."
        ),
    ] = None


@dataclass(frozen=True)
class PlacementOptions:
    """`estimate`'s placement: uneven stages, stage pools, communication overlap, MoE dispatch, offload."""

    layers_per_stage: Annotated[str | None, typer.Option(help="Uneven split, e.g. 19,21,21,19.")] = None
    pipeline_layout: Annotated[
        str | None,
        typer.Option(
            "--layout", help="Megatron --pipeline-model-parallel-layout, e.g. 'Et*2|(t*2|)*34,t*3|(t*2|)*3,tL'."
        ),
    ] = None
    stage_pools: Annotated[str | None, typer.Option(help="Pool per stage, comma-separated.")] = None
    tp_comm_overlap: Annotated[bool, typer.Option("--tp-comm-overlap", help="Overlap TP comm (needs --sp).")] = False
    no_grad_overlap: Annotated[bool, typer.Option("--no-grad-overlap", help="Do not overlap DP reduction.")] = False
    ep_comm_overlap: Annotated[
        bool, typer.Option("--ep-comm-overlap", help="Overlap the EP all-to-all across micro-batches (Megatron).")
    ] = False
    ep_dispatch: Annotated[
        str,
        typer.Option(
            "--ep-dispatch",
            help="MoE token dispatch: alltoall, or deepep (one copy per destination node over the network, "
            "forwarded over NVLink: DeepEP / HybridEP, Megatron --moe-token-dispatcher-type flex).",
        ),
    ] = "alltoall"
    offload_layers: Annotated[
        int,
        typer.Option(
            "--offload-layers",
            min=0,
            help="Training: layers whose activations go to host memory (Megatron --cpu-offloading-num-layers; "
            "pp 1, no recompute).",
        ),
    ] = 0
    redundant_experts: Annotated[
        int,
        typer.Option(
            "--redundant-experts",
            min=0,
            max=4096,
            help="Serving: extra expert replicas over the EP ranks (SGLang --ep-num-redundant-experts, vLLM EPLB).",
        ),
    ] = 0


@dataclass(frozen=True)
class MeasuredRun:
    """`estimate`'s offline measurement: what a run measured, to print beside the prediction (None: not given)."""

    log: Annotated[
        Path | None, typer.Option("--log", help="A run's log: print measured vs predicted (offline measurement).")
    ] = None
    step_time: Annotated[
        float | None, typer.Option("--measured-step-time", help="A run's seconds per step, to compare.")
    ] = None
    ran: Annotated[
        bool,
        typer.Option(
            "--ran",
            help="The configuration ran (implied by --log or --measured-step-time): state the memory overrun the "
            "model predicts instead of refusing it.",
        ),
    ] = False


# The scheduler imports and `sync` (api/scheduler_cli.py).
TopologyOpt = Annotated[
    Path | None,
    typer.Option("--topology", help="Slurm topology.conf (tree or block), or what `scontrol show topology` prints."),
]
FabricLabelsOpt = Annotated[
    str | None,
    typer.Option(
        help="Kubernetes: node label keys of the switch levels, leaf first, comma-separated (a Kueue Topology's "
        "levels; default: Topograph's fabric.topograph.run/tier-N)."
    ),
]
DomainLabelsOpt = Annotated[
    str | None,
    typer.Option(
        help="Kubernetes: label keys naming the NVLink domain, first present wins (default: nvidia.com/gpu.clique, "
        "accelerator.topograph.run/domain)."
    ),
]
OutputOpt = Annotated[
    Path | None,
    typer.Option(
        "--output",
        "-o",
        help="Write the YAML to this file, only once the import succeeded (default: stdout; a shell's `> file` is "
        "left empty when the command fails).",
    ),
]
NicGbpsOpt = Annotated[float, typer.Option(help="New pools: line rate of each data NIC, Gb/s (schedulers omit it).")]
NicsPerNodeOpt = Annotated[
    int | None, typer.Option(help="New pools: data NICs per node (default one per GPU; schedulers omit it).")
]
