"""vLLM 0.11.0's `vllm serve` parser on each launch of the payload (tests/frameworks/vllm_parse.py)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from vllm_parse import main

main()
