#!/usr/bin/env python3
"""Where a training step's GPU time goes, from Nsight Compute's per-kernel summary.

Input: the CSV of `ncu --metrics gpu__time_duration.sum --print-summary per-kernel --csv`
(bench/gpu/device_session.sh --profile writes it as ncu_bf16.csv). Output: the total GPU
time, the time per category (attention, GEMMs, casts, ...: the groups bench/RESULTS.md
reports) and the kernels that take the most, largest first.

    bench/gpu/ncu_summary.py ncu_bf16.csv [--top 15]
"""
import argparse
import csv
import sys

# Kernel name fragments -> category, first match wins (names as ncu prints them).
CATEGORIES = [
    ("attention", ("attention", "tiled_forward", "tiled_backward", "row_dot")),
    ("fp8 casts", ("quantize",)),
    ("bf16 casts", ("to_bf16", "from_bf16")),
    ("cross-entropy", ("cross_entropy",)),
    ("GEMMs", ("gemm", "nvjet", "cutlass", "xmma")),
    ("layernorm", ("layernorm",)),
    ("optimizer", ("adamw",)),
]
UNIT_MS = {"ns": 1e-6, "nsecond": 1e-6, "us": 1e-3, "usecond": 1e-3, "ms": 1.0, "msecond": 1.0}


def category(name):
    for label, fragments in CATEGORIES:
        if any(fragment in name for fragment in fragments):
            return label
    return "other"


def read_kernels(path):
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    header_at = next((i for i, r in enumerate(rows) if r and r[0] == "Process ID"), None)
    if header_at is None:
        sys.exit(f"ncu_summary: {path}: no 'Process ID' header: not ncu's --print-summary "
                 "per-kernel --csv output")
    header = rows[header_at]
    kernels = []
    for line, row in enumerate(rows[header_at + 1:], start=header_at + 2):
        if len(row) != len(header):
            continue
        d = dict(zip(header, row))
        if d["Metric Name"] != "gpu__time_duration.sum":
            continue
        unit = UNIT_MS.get(d["Metric Unit"])
        if unit is None:
            sys.exit(f"ncu_summary: {path}:{line}: unknown time unit '{d['Metric Unit']}'")
        calls = int(d["Invocations"])
        average_ms = float(d["Average"].replace(",", "")) * unit
        kernels.append((average_ms * calls, calls, average_ms, d["Kernel Name"]))
    return kernels


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv")
    ap.add_argument("--top", type=int, default=15)
    a = ap.parse_args()
    kernels = sorted(read_kernels(a.csv), reverse=True)
    total = sum(k[0] for k in kernels)
    if total <= 0:
        sys.exit(f"ncu_summary: {a.csv}: no kernel times")
    print(f"GPU time {total:.2f} ms in {sum(k[1] for k in kernels)} kernel calls")
    by_category = {}
    for k in kernels:
        by_category[category(k[3])] = by_category.get(category(k[3]), 0.0) + k[0]
    for label, ms in sorted(by_category.items(), key=lambda item: -item[1]):
        print(f"  {label:<14} {ms:9.2f} ms  {100 * ms / total:5.1f}%")
    print("largest kernels:")
    for ms, calls, average, name in kernels[:a.top]:
        print(f"  {ms:9.2f} ms  {calls:5d} x {average:8.3f} ms  {name[:90]}")


if __name__ == "__main__":
    main()
