#!/usr/bin/env python3
"""Writes the independent Q4_K oracle used by tests/q4k_format.rs.

Requires `pip install gguf numpy` (written against gguf 0.19.0). Outputs, next to each other in
tests/data/ (or the directory given as the first argument):

* q4k_golden.gguf: GGUF v3 written by gguf-py's GGUFWriter, containing Q4_K tensors of random
  valid blocks (random finite f16 d/dmin, random scale bytes, random nibbles), one F32 and one
  F16 tensor, and metadata of every value type (the test checks these exact values).
* q4k_golden_values.f32: for every Q4_K tensor, in the order the tensors appear in the GGUF
  file, the little-endian f32 values that gguf-py's own dequantiser (`gguf.quants.dequantize`)
  produces, row-major with ne0 fastest; no header, no padding. The values are taken from the
  tensors as gguf-py's GGUFReader reads them back from the written file.
"""

import sys
from pathlib import Path

import numpy as np
import gguf
from gguf import GGMLQuantizationType as T

SEED = 20260603
Q4K_SHAPES = {  # name -> numpy shape (reversed GGUF dims); ne0 is the last entry
    "blk.0.q4k_a": (3, 256),
    "blk.0.q4k_b": (5, 512),
    "blk.1.q4k_c": (2, 768),
    "blk.1.q4k_3d": (2, 2, 256),
}


def random_f16_bits(rng, n):
    """Finite f16 bit patterns: mostly realistic scales, some anything-finite (incl. negative,
    subnormal, zero and large)."""
    realistic = np.float16(rng.uniform(1e-4, 5e-2, n)).view(np.uint16)
    wild = rng.integers(0, 1 << 16, n, dtype=np.uint16)
    wild = np.where((wild & 0x7C00) == 0x7C00, wild & 0x83FF, wild)  # drop inf/nan
    pick = rng.random(n) < 0.8
    out = np.where(pick, realistic, wild).astype(np.uint16)
    special = [0x0000, 0x0001, 0x7BFF, 0x8400]  # zero, min subnormal, max finite, negative
    k = min(n, len(special))
    out[:k] = special[:k]
    return out


def random_q4k_blocks(rng, n_blocks):
    blocks = np.zeros((n_blocks, 144), dtype=np.uint8)
    blocks[:, 0:2] = random_f16_bits(rng, n_blocks).view(np.uint8).reshape(n_blocks, 2)
    blocks[:, 2:4] = random_f16_bits(rng, n_blocks)[::-1].copy().view(np.uint8).reshape(n_blocks, 2)
    blocks[:, 4:144] = rng.integers(0, 256, (n_blocks, 140), dtype=np.uint8)
    return blocks


def main():
    out_dir = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent / "tests" / "data"
    out_dir.mkdir(parents=True, exist_ok=True)
    gguf_path = out_dir / "q4k_golden.gguf"
    rng = np.random.default_rng(SEED)

    w = gguf.GGUFWriter(str(gguf_path), arch="wgk-test")  # adds general.architecture
    w.add_uint8("test.u8", 200)
    w.add_int8("test.i8", -100)
    w.add_uint16("test.u16", 60000)
    w.add_int16("test.i16", -30000)
    w.add_uint32("test.u32", 4000000000)
    w.add_int32("test.i32", -2000000000)
    w.add_float32("test.f32", 0.15625)
    w.add_bool("test.bool", True)
    w.add_string("test.string", "héllo wörld")
    w.add_uint64("test.u64", 2**64 - 1)
    w.add_int64("test.i64", -(2**63))
    w.add_float64("test.f64", -1.0e300)
    w.add_array("test.arr_str", ["a", "bc", ""])
    w.add_key_value("test.arr_i16", [-1, 2, -3], gguf.GGUFValueType.ARRAY, sub_type=gguf.GGUFValueType.INT16)
    w.add_array("test.arr_nested", [[1, 2], [3]])

    q4k_names = []
    for name, shape in Q4K_SHAPES.items():
        n_blocks = int(np.prod(shape)) // 256
        raw = random_q4k_blocks(rng, n_blocks).reshape(*shape[:-1], shape[-1] // 256 * 144)
        w.add_tensor(name, raw, raw_dtype=T.Q4_K)
        q4k_names.append(name)
    w.add_tensor("f32_tensor", rng.standard_normal((2, 3)).astype(np.float32))
    w.add_tensor("f16_tensor", rng.standard_normal((4, 8)).astype(np.float16))

    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()

    # Read the file back with gguf-py's reader and dequantise with gguf-py.
    reader = gguf.GGUFReader(str(gguf_path))
    values = []
    for t in reader.tensors:
        if t.tensor_type != T.Q4_K:
            continue
        deq = gguf.quants.dequantize(np.asarray(t.data), T.Q4_K).astype(np.float32)
        assert deq.size == int(np.prod(t.shape)), (t.name, deq.shape, t.shape)
        values.append(deq.reshape(-1))
        print(f"{t.name}: dims {list(map(int, t.shape))} -> {deq.size} values")
    assert [t.name for t in reader.tensors if t.tensor_type == T.Q4_K] == q4k_names
    all_vals = np.concatenate(values).astype("<f4")
    assert np.all(np.isfinite(all_vals))
    all_vals.tofile(out_dir / "q4k_golden_values.f32")
    print(f"wrote {gguf_path} ({gguf_path.stat().st_size} bytes) and {all_vals.size} values")


if __name__ == "__main__":
    main()
