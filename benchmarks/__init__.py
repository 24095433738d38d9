"""Benchmarks of focused: harvest against ground truth, throughput, frontier cost."""
