"""SGLang 0.3.0's ServerArgs on each launch of the payload (tests/frameworks/sglang_parse.py)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from sglang_parse import main

main()
