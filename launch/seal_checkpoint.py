#!/usr/bin/env python3
"""Seal a checkpoint written outside shardlab (e.g. with h5py) so that shardlab reads it.

shardlab refuses any checkpoint whose seal -- a checksum of the whole file in its first
32 bytes -- does not match, so that HDF5 never parses a damaged file
(docs/checkpoint_format.md). Create the file with room for the seal, then seal it:

    with h5py.File("init.h5", "w", libver=("v110", "latest"), userblock_size=512) as f: ...
    python3 launch/seal_checkpoint.py init.h5
"""
import os
import struct
import sys
import zlib

MAGIC = b"shardlab-seal".ljust(16, b"\0")
HEADER = 32  # magic, size, CRC-32 of every byte after the header
USERBLOCK = 512


def seal(path):
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        if f.read(8) == b"\x89HDF\r\n\x1a\n":
            sys.exit(f"{path}: HDF5 data starts at byte 0, so there is no room for the seal; "
                     f"create the file with userblock_size={USERBLOCK} (h5py.File(..., userblock_size={USERBLOCK}))")
        f.seek(HEADER)
        crc = 0
        for chunk in iter(lambda: f.read(1 << 20), b""):
            crc = zlib.crc32(chunk, crc)
    with open(path, "r+b") as f:
        f.write(MAGIC + struct.pack("<QQ", size, crc))


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    for p in sys.argv[1:]:
        seal(p)
        print(f"sealed {p}")
