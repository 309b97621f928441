#!/usr/bin/env python3
"""Deterministic PNG corpus and link lists for bench/prefetch-bench.sh (Python 3 stdlib only).

  gen_corpus.py generate --dir CORPUS --small N --large M
      Writes CORPUS/s/<xx>/sNNNNNN.png (N small images, 4-40 KB, ~16 KB mean) and
      CORPUS/l/<xx>/lNNNNNN.png (M large images, 1-4 MB, ~2.5 MB mean), then
      CORPUS/manifest.tsv ("path<TAB>size<TAB>sha256" per file, written last, so a
      present manifest means a complete corpus). Does nothing when the manifest
      already records the same counts and format version.

  gen_corpus.py lists --dir CORPUS --base-url http://127.0.0.1:PORT --out LISTDIR
      Writes, for each set (small, large): SET.txt (one URL a line, for imgd and
      wget2), SET.curl (a curl config of url/output pairs) and SET.aria2 (an aria2c
      input file, each URL with its out= name). Every peer saves a URL's file at
      the URL's path relative to its output folder, so one check fits them all.

The images are real PNGs that a strict validator accepts: signature, an IHDR whose
dimensions match the pixel data, one IDAT holding a zlib stream of exactly
height * (1 + 3 * width) bytes (filter byte 0 then random RGB per row), IEND, and
correct CRCs. Random pixels make the files incompressible, so no transfer layer can
shrink them. File contents depend only on the set and the index (seeded PRNG), so
the quick corpus's files are the same bytes as the first files of the full one.
"""
import argparse
import hashlib
import os
import random
import struct
import sys
import zlib

FORMAT_VERSION = 1
SETS = ("small", "large")
PREFIX = {"small": "s", "large": "l"}


def chunk(kind: bytes, data: bytes) -> bytes:
    """One PNG chunk: length, type, data, CRC over type+data."""
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def png(width: int, height: int, rng: random.Random) -> bytes:
    """An 8-bit RGB PNG of random pixels, unfiltered rows, zlib level 1."""
    stride = 1 + 3 * width
    raw = bytearray(rng.randbytes(stride * height))
    raw[::stride] = bytes(height)  # filter type 0 ("none") at the start of every row
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr)
            + chunk(b"IDAT", zlib.compress(bytes(raw), 1)) + chunk(b"IEND", b""))


def image_for(set_name: str, index: int) -> bytes:
    """The image for (set, index): its size and pixels come from a PRNG seeded by both."""
    rng = random.Random((SETS.index(set_name) << 32) | index)
    if set_name == "small":
        # Triangular(4 KB, 40 KB, mode 4 KB): mean (4 + 40 + 4) / 3 = 16 KB, long tail to 40 KB.
        target = int(rng.triangular(4 * 1024, 40 * 1024, 4 * 1024))
        width = rng.choice((24, 32, 48, 64, 96, 128))
    else:
        # Uniform 1-4 MB: mean 2.5 MB.
        target = int(rng.uniform(1 << 20, 4 << 20))
        width = rng.choice((800, 1024, 1280, 1600))
    overhead = 8 + 25 + 12 + 12 + 6  # signature, IHDR, IDAT header+CRC, IEND, zlib header+adler
    height = max(1, round((target - overhead) / (1 + 3 * width)))
    return png(width, height, rng)


def rel_path(set_name: str, index: int) -> str:
    p = PREFIX[set_name]
    return f"{p}/{index % 256:02x}/{p}{index:06d}.png"


def read_manifest(corpus: str):
    """(header dict, [(path, size, sha256)]) or (None, None) when absent."""
    path = os.path.join(corpus, "manifest.tsv")
    if not os.path.exists(path):
        return None, None
    header, rows = {}, []
    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if line.startswith("#"):
                for item in line[1:].split():
                    key, _, value = item.partition("=")
                    header[key] = value
            elif line:
                p, size, digest = line.split("\t")
                rows.append((p, int(size), digest))
    return header, rows


def generate(corpus: str, small: int, large: int) -> None:
    header, _ = read_manifest(corpus)
    wanted = {"version": str(FORMAT_VERSION), "small": str(small), "large": str(large)}
    if header is not None and all(header.get(k) == v for k, v in wanted.items()):
        print(f"corpus: cached in {corpus} ({small} small, {large} large)")
        return
    manifest_path = os.path.join(corpus, "manifest.tsv")
    if os.path.exists(manifest_path):
        os.unlink(manifest_path)  # the corpus is incomplete until a new manifest is written
    lines = []
    totals = {}
    for set_name, count in (("small", small), ("large", large)):
        total = 0
        for index in range(count):
            data = image_for(set_name, index)
            rel = rel_path(set_name, index)
            path = os.path.join(corpus, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "wb") as f:
                f.write(data)
            lines.append(f"{rel}\t{len(data)}\t{hashlib.sha256(data).hexdigest()}\n")
            total += len(data)
            if (index + 1) % 5000 == 0:
                print(f"corpus: {set_name} {index + 1}/{count}", file=sys.stderr)
        totals[set_name] = total
    tmp = manifest_path + ".tmp"
    with open(tmp, "w") as f:
        f.write(f"# version={FORMAT_VERSION} small={small} large={large} "
                f"small_bytes={totals['small']} large_bytes={totals['large']}\n")
        f.writelines(lines)
    os.replace(tmp, manifest_path)
    for set_name, count in (("small", small), ("large", large)):
        mean = totals[set_name] / count if count else 0
        print(f"corpus: generated {count} {set_name} images, {totals[set_name] / 1e6:.1f} MB, "
              f"mean {mean / 1024:.1f} KiB")


def write_lists(corpus: str, base_url: str, out: str) -> None:
    header, rows = read_manifest(corpus)
    if header is None:
        sys.exit(f"no manifest in {corpus}; run 'generate' first")
    os.makedirs(out, exist_ok=True)
    base_url = base_url.rstrip("/")
    for set_name in SETS:
        prefix = PREFIX[set_name] + "/"
        paths = [p for p, _, _ in rows if p.startswith(prefix)]
        with open(os.path.join(out, f"{set_name}.txt"), "w") as txt, \
                open(os.path.join(out, f"{set_name}.curl"), "w") as cfg, \
                open(os.path.join(out, f"{set_name}.aria2"), "w") as aria:
            for p in paths:
                url = f"{base_url}/{p}"
                txt.write(url + "\n")
                # curl: with --output-dir and --create-dirs, output is relative to that folder.
                cfg.write(f'url = "{url}"\noutput = "{p}"\n')
                # aria2c: option lines under a URL must be indented; out= is relative to -d.
                aria.write(f"{url}\n  out={p}\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    gen = sub.add_parser("generate")
    gen.add_argument("--dir", required=True)
    gen.add_argument("--small", type=int, required=True)
    gen.add_argument("--large", type=int, required=True)
    lists = sub.add_parser("lists")
    lists.add_argument("--dir", required=True)
    lists.add_argument("--base-url", required=True)
    lists.add_argument("--out", required=True)
    args = parser.parse_args()
    if args.command == "generate":
        generate(args.dir, args.small, args.large)
    else:
        write_lists(args.dir, args.base_url, args.out)


if __name__ == "__main__":
    main()
