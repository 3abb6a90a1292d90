"""DeepSpeed 0.19.6's config class on an export: the same check as tests/frameworks/deepspeed/check.py, run under
this folder's environment (.frameworks/deepspeed_0_19_6)."""

import runpy
from pathlib import Path

runpy.run_path(str(Path(__file__).resolve().parent.parent / "deepspeed" / "check.py"), run_name="__main__")
