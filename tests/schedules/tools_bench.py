"""Imports tools/bench_conv.py (not a package) for the tests that reuse its layer tables."""

import importlib.util
import sys
from pathlib import Path

_path = Path(__file__).resolve().parents[2] / "tools" / "bench_conv.py"
_spec = importlib.util.spec_from_file_location("bench_conv", _path)
bench_conv = importlib.util.module_from_spec(_spec)
sys.modules.setdefault("bench_conv", bench_conv)
_spec.loader.exec_module(bench_conv)
conv_layers = bench_conv.conv_layers
