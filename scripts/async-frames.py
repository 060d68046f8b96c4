#!/usr/bin/env python3
"""Lists the largest async frames of push-worker's own async functions in a built binary.

Every job in flight keeps the frames of its whole chain of async calls (the history of docs/performance.md:
`git log -S "20 KB of async frames" -- docs/performance.md`). Each async function's frame size is the
`expectedContextSize` of its async function pointer: a symbol whose mangled name ends in `Tu`,
holding a 32-bit relative offset to the function and then the 32-bit size.

Usage: scripts/async-frames.py [BINARY] [--match TEXT] [--top N]
  BINARY   default .build/release/push-worker (build it with `swift build -c release --product push-worker`)
  --match  only functions whose demangled name contains TEXT (say, JobProcessor or deliver)
  --top    how many rows (default 40)
Needs nm, readelf (binutils) and swift-demangle (with the Swift toolchain).
"""
import argparse
import shutil
import struct
import subprocess
import sys

# Development tools, sandboxes and benchmarks have async functions too; they never run in the worker.
NOT_THE_WORKER = ("Bench", "Demo", "Sandbox", "Testing", "Mock", "RedisCLI", "RedisCluster", "CommandParser")


def loadable_segments(binary):
    """(virtual address, file offset, size in file) of each PT_LOAD segment."""
    output = subprocess.run(["readelf", "-lW", binary], capture_output=True, text=True, check=True).stdout
    segments = []
    for line in output.splitlines():
        fields = line.split()
        if fields and fields[0] == "LOAD":
            segments.append((int(fields[2], 16), int(fields[1], 16), int(fields[4], 16)))
    return segments


def frame_sizes(binary):
    """(size, mangled name) of every async function pointer defined in the binary."""
    segments = loadable_segments(binary)
    with open(binary, "rb") as file:
        image = file.read()
    symbols = subprocess.run(["nm", "--defined-only", binary], capture_output=True, text=True, check=True).stdout
    sizes = []
    for line in symbols.splitlines():
        parts = line.split(" ", 2)
        if len(parts) != 3 or not parts[2].endswith("Tu"):
            continue
        address = int(parts[0], 16)
        for start, offset, length in segments:
            if start <= address < start + length:
                position = offset + address - start
                _, size = struct.unpack("<iI", image[position:position + 8])
                sizes.append((size, parts[2]))
                break
    return sizes


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("binary", nargs="?", default=".build/release/push-worker")
    parser.add_argument("--match", default="")
    parser.add_argument("--top", type=int, default=40)
    arguments = parser.parse_args()
    for tool in ("nm", "readelf", "swift-demangle"):
        if shutil.which(tool) is None:
            sys.exit(f"async-frames: {tool} not found")
    sizes = frame_sizes(arguments.binary)
    names = subprocess.run(["swift-demangle", "--simplified"], input="\n".join(name for _, name in sizes),
                           capture_output=True, text=True, check=True).stdout.splitlines()
    rows = sorted(((size, name.removeprefix("async function pointer to "))
                   for (size, _), name in zip(sizes, names)), reverse=True)
    shown = 0
    for size, name in rows:
        if arguments.match not in name or any(word in name for word in NOT_THE_WORKER):
            continue
        print(f"{size:6d}  {name}")
        shown += 1
        if shown == arguments.top:
            break


if __name__ == "__main__":
    main()
