#!/usr/bin/env python3
"""Writes the independent per-format dequantisation oracle used by tests/format_golden.rs.

Requires `pip install gguf numpy` (written against gguf 0.19.0). For every format below it writes
tests/data/formats/<type>.gguf (or into the directory given as the first argument), a GGUF v3
file written by gguf-py's GGUFWriter with:

* metadata `general.architecture` = "wgk-test" and `wgk.golden.type` = the type name;
* tensors `w.a`, `w.b`, ... of that type, with odd row counts and one 3-D tensor;
* for every such tensor, an F32 tensor `<name>.ref` of the same shape holding the values that
  gguf-py's own dequantiser (`gguf.quants.dequantize`) produces from the tensor as gguf-py's
  GGUFReader reads it back from the written file.

Where gguf-py can quantise (F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1) the weights are gguf-py's
quantisation of random f32 rows (Gaussian rows at mixed scales, plus all-zero, constant,
one-spike and tiny rows). The K-quants (Q2_K, Q3_K, Q4_K, Q5_K, Q6_K) are random valid blocks:
random finite f16 scales (mostly realistic, some anything-finite: negative, zero, subnormal,
large) and random bytes everywhere else.
"""

import sys
from pathlib import Path

import numpy as np
import gguf
from gguf import GGMLQuantizationType as T

SEED = 20261125

# numpy shapes (reversed GGUF dims, ne0 last); row counts are odd where the shape has rows.
SHAPES_SMALL = [(3, 12), (5, 96), (1, 4), (2, 3, 7)]  # block size 1 (one k not a multiple of 4)
SHAPES_32 = [(3, 64), (5, 160), (1, 32), (2, 3, 96)]
SHAPES_256 = [(3, 256), (5, 512), (7, 256), (2, 3, 256)]

QUANTISED_BY_GGUF_PY = [T.F32, T.F16, T.BF16, T.Q8_0, T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1]

# K-quant byte layouts: offsets of the f16 fields in a block; every other byte is random.
K_F16_FIELDS = {
    T.Q2_K: [80, 82],  # scales[16] qs[64] d dmin
    T.Q3_K: [108],  # hmask[32] qs[64] scales[12] d
    T.Q4_K: [0, 2],  # d dmin scales[12] qs[128]
    T.Q5_K: [0, 2],  # d dmin scales[12] qh[32] qs[128]
    T.Q6_K: [208],  # ql[128] qh[64] scales[16] d
}


def random_f16_bits(rng, n):
    """Finite f16 bit patterns: mostly realistic scales, some anything-finite (including
    negative, subnormal, zero and large), and a few fixed special values first."""
    realistic = np.float16(rng.uniform(1e-5, 2e-2, n)).view(np.uint16)
    wild = rng.integers(0, 1 << 16, n, dtype=np.uint16)
    wild = np.where((wild & 0x7C00) == 0x7C00, wild & 0x83FF, wild)  # drop inf/nan
    pick = rng.random(n) < 0.75
    out = np.where(pick, realistic, wild).astype(np.uint16)
    special = [0x0000, 0x0001, 0x03FF, 0x7BFF, 0x8400, 0x8000]  # 0, subnormals, max, negatives
    k = min(n, len(special))
    out[:k] = special[:k]
    return out


def random_k_blocks(rng, qtype, n_blocks):
    block_size, type_size = gguf.GGML_QUANT_SIZES[qtype]
    assert block_size == 256
    blocks = rng.integers(0, 256, (n_blocks, type_size), dtype=np.uint8)
    for at in K_F16_FIELDS[qtype]:
        bits = random_f16_bits(rng, n_blocks)
        rng.shuffle(bits)
        blocks[:, at:at + 2] = bits.view(np.uint8).reshape(n_blocks, 2)
    return blocks


def random_rows(rng, shape):
    """f32 rows with varied structure for gguf-py's quantisers."""
    x = rng.standard_normal(shape).astype(np.float32)
    rows = x.reshape(-1, shape[-1])
    scales = 10.0 ** rng.uniform(-3, 1, (rows.shape[0], 1))
    rows *= scales.astype(np.float32)
    if rows.shape[0] >= 3:
        rows[0, : min(32, shape[-1])] = 0.0  # an all-zero block (zero scale)
        rows[1, : min(32, shape[-1])] = -0.75  # a constant block
        spike = min(32, shape[-1]) // 2
        rows[2, :spike] *= 1e-6  # tiny values: subnormal f16 scales
    if rows.shape[0] >= 5:
        rows[4, 3 % shape[-1]] = -40.0  # one spike dominating the block
    return x


def write_file(path, qtype, tensors):
    """tensors: list of (name, array, raw_dtype or None)."""
    w = gguf.GGUFWriter(str(path), arch="wgk-test")
    w.add_string("wgk.golden.type", qtype.name)
    for tname, data, raw_dtype in tensors:
        if raw_dtype is None:
            w.add_tensor(tname, data)
        else:
            w.add_tensor(tname, data, raw_dtype=raw_dtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def write_format(out_dir, qtype, rng):
    path = out_dir / f"{qtype.name}.gguf"
    block_size, type_size = gguf.GGML_QUANT_SIZES[qtype]
    shapes = {1: SHAPES_SMALL, 32: SHAPES_32, 256: SHAPES_256}[block_size]

    weights = []
    for i, shape in enumerate(shapes):
        tname = f"w.{chr(ord('a') + i)}"
        if qtype in QUANTISED_BY_GGUF_PY:
            data = gguf.quants.quantize(random_rows(rng, shape), qtype)
        else:
            n_blocks = int(np.prod(shape)) // 256
            data = random_k_blocks(rng, qtype, n_blocks).reshape(*shape[:-1], shape[-1] // 256 * type_size)
        weights.append((tname, data, None if qtype in (T.F32, T.F16) else qtype))

    # First the weights alone; gguf-py's reader reads them back and gguf-py dequantises them.
    tmp = path.with_suffix(".tmp")
    write_file(tmp, qtype, weights)
    reader = gguf.GGUFReader(str(tmp))
    refs = {}
    for t in reader.tensors:
        assert t.tensor_type == qtype, (t.name, t.tensor_type)
        deq = gguf.quants.dequantize(np.asarray(t.data), qtype).astype(np.float32)
        assert deq.size == int(np.prod(t.shape)), (t.name, deq.shape, t.shape)
        assert np.all(np.isfinite(deq)), t.name
        refs[t.name] = deq.copy()
    del reader
    tmp.unlink()
    assert list(refs) == [n for n, _, _ in weights]

    # The final file: each weight followed by its reference values.
    tensors = []
    for (tname, data, raw_dtype), shape in zip(weights, shapes):
        tensors.append((tname, data, raw_dtype))
        tensors.append((f"{tname}.ref", refs[tname].reshape(shape), None))
    write_file(path, qtype, tensors)

    # It must read back to the same references.
    check = {t.name: t for t in gguf.GGUFReader(str(path)).tensors}
    n_values = 0
    for tname, deq in refs.items():
        again = gguf.quants.dequantize(np.asarray(check[tname].data), qtype).astype(np.float32)
        assert again.reshape(-1).tobytes() == deq.reshape(-1).tobytes(), tname
        stored = np.asarray(check[f"{tname}.ref"].data)
        assert check[f"{tname}.ref"].tensor_type == T.F32
        assert stored.reshape(-1).tobytes() == deq.reshape(-1).tobytes(), tname
        n_values += deq.size
    print(f"{path.name}: {len(refs)} tensors, {n_values} values, {path.stat().st_size} bytes")


def main():
    out_dir = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent / "tests" / "data" / "formats"
    out_dir.mkdir(parents=True, exist_ok=True)
    formats = QUANTISED_BY_GGUF_PY + list(K_F16_FIELDS)
    for i, qtype in enumerate(formats):
        write_format(out_dir, qtype, np.random.default_rng(SEED + i))


if __name__ == "__main__":
    main()
