"""What DeepSpeed's own config class makes of an exported ds_config.json (run under .frameworks/deepspeed).

stdin: {"config": <the exported JSON object>, "world_size": GPUs, "tp": t, "pp": p}. stdout, last line:
{"ok": true, "result": {...}} with the values DeepSpeed parsed, or {"ok": false, "error": "..."}.

Only the distributed / GPU runtime is stood in:
- torch.distributed is a real one-process gloo group (DeepSpeedConfig reads the rank from deepspeed.comm and falls
  back to world size 1 when it is not initialised: deepspeed/runtime/config.py DeepSpeedConfig.__init__);
- the model-parallel unit is a minimal object answering what Megatron-DeepSpeed's mpu, a PipelineModule's topology or
  an AutoTP ModelParallelUnit answers on the plan's cluster: data-parallel world = world / (tp x pp), tensor-parallel
  world = tp (DeepSpeedConfig takes its data-parallel size from mpu.get_data_parallel_world_size());
- the CPU accelerator's shared-memory comm op (deepspeed/comm/torch.py build_shm_op, a C++ extension JIT-compiled on
  first use) is not built: no CPU collective runs here.
Then deepspeed.checkpointing.configure reads the activation_checkpointing block as the model code's call would.
"""

from __future__ import annotations

import json
import os
import socket
import sys
from typing import Any


class PlanMPU:
    """The plan's model-parallel unit: rank 0 of a world of `world` GPUs split tp x dp x pp (no process groups)."""

    def __init__(self, world: int, tp: int, pp: int) -> None:
        self.world, self.tp, self.pp = world, tp, pp

    def get_data_parallel_world_size(self) -> int:
        return self.world // (self.tp * self.pp)

    def get_data_parallel_rank(self) -> int:
        return 0

    def get_data_parallel_group(self) -> None:
        return None

    def get_tensor_model_parallel_world_size(self) -> int:
        return self.tp

    def get_tensor_model_parallel_rank(self) -> int:
        return 0

    def get_tensor_model_parallel_group(self) -> None:
        return None

    def get_pipeline_model_parallel_world_size(self) -> int:
        return self.pp


def one_process_group() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    os.environ.update(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    import deepspeed

    # `import deepspeed.comm.torch` binds the name torch of the package; the module is in sys.modules.
    __import__("deepspeed.comm.torch")
    sys.modules["deepspeed.comm.torch"].build_shm_op = lambda: None  # type: ignore[attr-defined]
    deepspeed.init_distributed(dist_backend="gloo", auto_mpi_discovery=False)


def device(offload: Any) -> str | None:
    return None if offload is None else str(getattr(offload.device, "value", offload.device))


def parsed(config: dict[str, Any], mpu: PlanMPU) -> dict[str, Any]:
    import deepspeed
    from deepspeed.runtime.config import DeepSpeedConfig

    cfg = DeepSpeedConfig(config, mpu=mpu)
    z = cfg.zero_config
    act = cfg.activation_checkpointing_config
    if "activation_checkpointing" in config:
        deepspeed.checkpointing.configure(mpu, deepspeed_config=config)
    return {
        "deepspeed": deepspeed.__version__,
        "world_size": cfg.world_size,
        "train_batch_size": cfg.train_batch_size,
        "train_micro_batch_size_per_gpu": cfg.train_micro_batch_size_per_gpu,
        "gradient_accumulation_steps": cfg.gradient_accumulation_steps,
        "zero_stage": int(cfg.zero_optimization_stage),
        "overlap_comm": z.overlap_comm,
        "contiguous_gradients": z.contiguous_gradients,
        "reduce_scatter": z.reduce_scatter,
        "reduce_bucket_size": z.reduce_bucket_size,
        "allgather_bucket_size": z.allgather_bucket_size,
        "stage3_prefetch_bucket_size": z.prefetch_bucket_size,
        "stage3_param_persistence_threshold": z.param_persistence_threshold,
        "stage3_max_live_parameters": z.max_live_parameters,
        "stage3_max_reuse_distance": z.max_reuse_distance,
        "offload_optimizer": device(z.offload_optimizer),
        "offload_param": device(z.offload_param),
        # MiCS was removed in 0.19.7 (its keys are refused, runtime/config.py _REMOVED_ZERO_CONFIG_KEYS)
        "mics_shard_size": getattr(cfg, "mics_shard_size", None),
        "zero_hpz_partition_size": z.zero_hpz_partition_size,
        "bf16": bool(cfg.bfloat16_config.enabled),
        "fp16": bool(cfg.float16_config.enabled),
        "grad_accum_dtype": cfg.grad_accum_dtype,
        "gradient_clipping": cfg.gradient_clipping,
        "autotp_size": cfg.tensor_parallel_config.autotp_size,
        "activation_checkpointing": "activation_checkpointing" in config,
        "partition_activations": act.partition_activations,
        "contiguous_memory_optimization": act.contiguous_memory_optimization,
        "cpu_checkpointing": act.cpu_checkpointing,
        "number_checkpoints": act.number_checkpoints,
    }


def main() -> None:
    payload = json.loads(sys.stdin.read())
    one_process_group()
    mpu = PlanMPU(int(payload["world_size"]), int(payload.get("tp", 1)), int(payload.get("pp", 1)))
    try:
        out: dict[str, Any] = {"ok": True, "result": parsed(payload["config"], mpu)}
    except Exception as e:  # DeepSpeedConfigError, its assertions, pydantic's ValidationError: what DeepSpeed said
        out = {"ok": False, "error": f"{type(e).__name__}: {e}"}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
