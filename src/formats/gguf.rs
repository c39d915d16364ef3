//! GGUF reader (versions 2 and 3) and a small writer.
//!
//! Layout (little-endian): magic `GGUF`, u32 version, u64 tensor count, u64 metadata count,
//! the metadata key/values, the tensor infos (name, u32 n_dims, u64 dims ne0 first, u32 ggml
//! type, u64 offset relative to the data section), padding to `general.alignment` (default
//! 32), then the data section.
//!
//! # What parsing costs and promises
//!
//! Every length and count is checked against the bytes that remain before anything is
//! allocated, so corrupt input gives a [`FormatError`], never a panic or a huge allocation.
//! Arrays are stored compactly ([`MetaArray`]: a typed vector per array, strings in one buffer),
//! and everything the parser keeps besides the image is charged against a budget of the file's
//! size plus [`METADATA_SLACK`] bytes ([`FormatError::MetadataTooLarge`] beyond it): parsing an
//! image of `n` bytes holds at most `n + METADATA_SLACK` bytes of metadata next to the image,
//! so [`GgufFile::read`] peaks at about twice the file size whatever the file contains.
//!
//! # Files that change while open
//!
//! [`GgufFile::open`] and [`GgufFile::read`] read the file into memory: nothing another process
//! does to the file afterwards can fault this one. [`GgufFile::open_mapped`] maps the file
//! instead (a model's tensor bytes are paged in as they are read rather than copied up front);
//! it is `unsafe` because a mapped file truncated by another process turns a read of the
//! missing pages into SIGBUS, which no check here can catch.

use std::path::Path;

use super::FormatError;

mod array;
mod write;
pub use array::{MetaArray, StringList};
pub use write::GgufWriter;

/// Metadata bytes the parser may hold beyond the file's own size (small files' fixed overheads).
pub const METADATA_SLACK: u64 = 64 * 1024;

/// The file magic.
pub const MAGIC: [u8; 4] = *b"GGUF";
/// Data alignment when `general.alignment` is absent.
pub const DEFAULT_ALIGNMENT: u64 = 32;
/// Most dimensions a tensor may have (ggml's `GGML_MAX_DIMS`).
pub const MAX_DIMS: u32 = 4;
/// Deepest array nesting the reader accepts.
pub const MAX_ARRAY_DEPTH: usize = 8;

/// Metadata value type ids as stored in the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum ValueType {
    U8 = 0,
    I8 = 1,
    U16 = 2,
    I16 = 3,
    U32 = 4,
    I32 = 5,
    F32 = 6,
    Bool = 7,
    String = 8,
    Array = 9,
    U64 = 10,
    I64 = 11,
    F64 = 12,
}

impl ValueType {
    /// The type for a file id, or `UnknownValueType`.
    pub fn from_id(id: u32) -> Result<Self, FormatError> {
        use ValueType::*;
        const ALL: [ValueType; 13] = [U8, I8, U16, I16, U32, I32, F32, Bool, String, Array, U64, I64, F64];
        ALL.get(id as usize).copied().ok_or(FormatError::UnknownValueType(id))
    }

    /// Fewest bytes one value of this type occupies in a file.
    fn min_size(self) -> u64 {
        use ValueType::*;
        match self {
            U8 | I8 | Bool => 1,
            U16 | I16 => 2,
            U32 | I32 | F32 => 4,
            U64 | I64 | F64 | String => 8,
            Array => 12,
        }
    }
}

/// One metadata value.
#[derive(Clone, Debug, PartialEq)]
pub enum MetaValue {
    U8(u8),
    I8(i8),
    U16(u16),
    I16(i16),
    U32(u32),
    I32(i32),
    F32(f32),
    Bool(bool),
    String(String),
    /// An array (its element type is kept, so empty arrays round-trip).
    Array(MetaArray),
    U64(u64),
    I64(i64),
    F64(f64),
}

impl MetaValue {
    /// The value's type id.
    pub fn value_type(&self) -> ValueType {
        match self {
            MetaValue::U8(_) => ValueType::U8,
            MetaValue::I8(_) => ValueType::I8,
            MetaValue::U16(_) => ValueType::U16,
            MetaValue::I16(_) => ValueType::I16,
            MetaValue::U32(_) => ValueType::U32,
            MetaValue::I32(_) => ValueType::I32,
            MetaValue::F32(_) => ValueType::F32,
            MetaValue::Bool(_) => ValueType::Bool,
            MetaValue::String(_) => ValueType::String,
            MetaValue::Array(_) => ValueType::Array,
            MetaValue::U64(_) => ValueType::U64,
            MetaValue::I64(_) => ValueType::I64,
            MetaValue::F64(_) => ValueType::F64,
        }
    }

    /// Any non-negative integer value as u64.
    pub fn as_u64(&self) -> Option<u64> {
        match *self {
            MetaValue::U8(v) => Some(v.into()),
            MetaValue::U16(v) => Some(v.into()),
            MetaValue::U32(v) => Some(v.into()),
            MetaValue::U64(v) => Some(v),
            MetaValue::I8(v) => u64::try_from(v).ok(),
            MetaValue::I16(v) => u64::try_from(v).ok(),
            MetaValue::I32(v) => u64::try_from(v).ok(),
            MetaValue::I64(v) => u64::try_from(v).ok(),
            _ => None,
        }
    }

    /// Any float value as f64.
    pub fn as_f64(&self) -> Option<f64> {
        match *self {
            MetaValue::F32(v) => Some(v.into()),
            MetaValue::F64(v) => Some(v),
            _ => None,
        }
    }

    /// The string, if this is one.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            MetaValue::String(s) => Some(s),
            _ => None,
        }
    }

    /// The array, if this is one.
    pub fn as_array(&self) -> Option<&MetaArray> {
        match self {
            MetaValue::Array(a) => Some(a),
            _ => None,
        }
    }

    /// An array value of `elem_type` from values of that type (see [`MetaArray::from_values`]).
    pub fn array(elem_type: ValueType, items: &[MetaValue]) -> Result<MetaValue, FormatError> {
        MetaArray::from_values(elem_type, items).map(MetaValue::Array)
    }
}

macro_rules! ggml_types {
    ($($name:ident = $id:literal, $blk:literal, $bytes:literal;)*) => {
        /// ggml tensor types; ids not listed here are kept as `Other(id)`.
        #[allow(non_camel_case_types)]
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum GgmlType { $($name,)* Other(u32) }

        impl GgmlType {
            /// The type for a file id.
            pub fn from_id(id: u32) -> Self {
                match id { $($id => GgmlType::$name,)* other => GgmlType::Other(other) }
            }
            /// The file id.
            pub fn id(self) -> u32 {
                match self { $(GgmlType::$name => $id,)* GgmlType::Other(id) => id }
            }
            /// `(elements per block, bytes per block)`, or `None` for unknown types.
            pub fn block_size(self) -> Option<(u64, u64)> {
                match self { $(GgmlType::$name => Some(($blk, $bytes)),)* GgmlType::Other(_) => None }
            }
        }
    };
}

ggml_types! {
    F32 = 0, 1, 4;
    F16 = 1, 1, 2;
    Q4_0 = 2, 32, 18;
    Q4_1 = 3, 32, 20;
    Q5_0 = 6, 32, 22;
    Q5_1 = 7, 32, 24;
    Q8_0 = 8, 32, 34;
    Q8_1 = 9, 32, 40;
    Q2_K = 10, 256, 84;
    Q3_K = 11, 256, 110;
    Q4_K = 12, 256, 144;
    Q5_K = 13, 256, 176;
    Q6_K = 14, 256, 210;
    Q8_K = 15, 256, 292;
    IQ2_XXS = 16, 256, 66;
    IQ2_XS = 17, 256, 74;
    IQ3_XXS = 18, 256, 98;
    IQ1_S = 19, 256, 50;
    IQ4_NL = 20, 32, 18;
    IQ3_S = 21, 256, 110;
    IQ2_S = 22, 256, 82;
    IQ4_XS = 23, 256, 136;
    I8 = 24, 1, 1;
    I16 = 25, 1, 2;
    I32 = 26, 1, 4;
    I64 = 27, 1, 8;
    F64 = 28, 1, 8;
    IQ1_M = 29, 256, 56;
    BF16 = 30, 1, 2;
    TQ1_0 = 34, 256, 54;
    TQ2_0 = 35, 256, 66;
    MXFP4 = 39, 32, 17;
}

impl GgmlType {
    /// Bytes needed for `n_elements` values (`n_elements` must be a multiple of the block
    /// size); `None` for unknown types, partial blocks or overflow.
    pub fn bytes_for(self, n_elements: u64) -> Option<u64> {
        let (blk, bytes) = self.block_size()?;
        if n_elements % blk != 0 {
            return None;
        }
        (n_elements / blk).checked_mul(bytes)
    }
}

/// One tensor's header entry.
#[derive(Clone, Debug, PartialEq)]
pub struct TensorInfo {
    pub name: String,
    /// Dimensions, `ne0` (the contiguous one, K for weights) first.
    pub dims: Vec<u64>,
    pub ggml_type: GgmlType,
    /// Offset from the start of the data section.
    pub offset: u64,
    /// Product of `dims` (1 for zero dimensions).
    pub n_elements: u64,
    /// Byte size, `None` when the type's block size is unknown.
    pub n_bytes: Option<u64>,
}

/// Where a file image lives: in memory, or mapped from disk (see [`GgufFile::open`]).
#[derive(Debug)]
enum Image {
    Owned(Vec<u8>),
    #[cfg(not(target_arch = "wasm32"))]
    Mapped(memmap2::Mmap),
}

impl std::ops::Deref for Image {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Image::Owned(v) => v,
            #[cfg(not(target_arch = "wasm32"))]
            Image::Mapped(m) => m,
        }
    }
}

/// A parsed GGUF file that owns (or maps) its bytes.
#[derive(Debug)]
pub struct GgufFile {
    version: u32,
    alignment: u64,
    data_offset: u64,
    metadata: Vec<(String, MetaValue)>,
    tensors: Vec<TensorInfo>,
    bytes: Image,
}

/// An I/O error of `path`, naming it.
fn io_at(path: &Path) -> impl Fn(std::io::Error) -> FormatError + '_ {
    move |e| FormatError::Io(std::io::Error::new(e.kind(), format!("{}: {e}", path.display())))
}

/// [`FormatError::Io`] of kind `IsADirectory` when `path` is a directory (which reading or
/// mapping would report obscurely, e.g. "No such device").
fn not_a_directory(path: &Path) -> Result<(), FormatError> {
    match std::fs::metadata(path) {
        Ok(m) if m.is_dir() => Err(FormatError::Io(std::io::Error::new(std::io::ErrorKind::IsADirectory, format!("{}: is a directory, not a GGUF file", path.display())))),
        _ => Ok(()),
    }
}

impl GgufFile {
    /// Parses a file image (copies `bytes`; see [`GgufFile::from_vec`] to avoid the copy).
    pub fn parse(bytes: &[u8]) -> Result<Self, FormatError> {
        Self::from_vec(bytes.to_vec())
    }

    /// Parses a file image, taking ownership of it.
    pub fn from_vec(bytes: Vec<u8>) -> Result<Self, FormatError> {
        Self::from_image(Image::Owned(bytes))
    }

    fn from_image(bytes: Image) -> Result<Self, FormatError> {
        let mut r = Reader { buf: &bytes, pos: 0, budget: (bytes.len() as u64).saturating_add(METADATA_SLACK) };
        let magic: [u8; 4] = r.take(4, "magic")?.try_into().expect("4 bytes");
        if magic != MAGIC {
            return Err(FormatError::BadMagic(magic));
        }
        let version = r.u32("version")?;
        if version != 2 && version != 3 {
            return Err(FormatError::UnsupportedVersion(version));
        }
        let n_tensors = r.u64("tensor count")?;
        let n_kv = r.u64("metadata count")?;
        // A key/value needs at least 8 + 4 + 1 bytes, a tensor info at least 8 + 4 + 4 + 8.
        r.check_count(n_kv, 13, "metadata count")?;
        r.charge_items::<(String, MetaValue)>(n_kv)?;
        let mut metadata = Vec::with_capacity(n_kv as usize);
        for _ in 0..n_kv {
            let key = r.string("metadata key")?;
            let ty = ValueType::from_id(r.u32("metadata value type")?)?;
            let value = r.value(ty, 0)?;
            metadata.push((key, value));
        }
        r.charge_items::<&str>(n_kv)?;
        if let Some(k) = first_duplicate(metadata.iter().map(|(k, _)| k.as_str())) {
            return Err(FormatError::DuplicateKey(k));
        }
        let alignment = match metadata.iter().find(|(k, _)| k == "general.alignment") {
            None => DEFAULT_ALIGNMENT,
            Some((k, v)) => v.as_u64().ok_or_else(|| FormatError::WrongMetadataType { key: k.clone(), expected: "an unsigned integer" })?,
        };
        if alignment == 0 || !alignment.is_power_of_two() {
            return Err(FormatError::BadAlignment(alignment));
        }
        r.check_count(n_tensors, 24, "tensor count")?;
        r.charge_items::<TensorInfo>(n_tensors)?;
        let mut tensors = Vec::with_capacity(n_tensors as usize);
        for _ in 0..n_tensors {
            tensors.push(r.tensor_info()?);
        }
        r.charge_items::<&str>(n_tensors)?;
        if let Some(n) = first_duplicate(tensors.iter().map(|t| t.name.as_str())) {
            return Err(FormatError::DuplicateTensor(n));
        }
        let data_offset = (r.pos as u64).div_ceil(alignment) * alignment;
        let file = GgufFile { version, alignment, data_offset, metadata, tensors, bytes };
        for t in &file.tensors {
            if t.offset % alignment != 0 {
                return Err(FormatError::MisalignedTensor { name: t.name.clone(), offset: t.offset, alignment });
            }
            if t.n_bytes.is_some() {
                file.tensor_data(t)?;
            }
        }
        Ok(file)
    }

    /// Opens and parses a file, reading it into memory (the same as [`GgufFile::read`]): the
    /// result does not depend on the file afterwards, so a file truncated or rewritten later
    /// cannot fault the process. For large models where the copy matters, see
    /// [`GgufFile::open_mapped`].
    pub fn open(path: impl AsRef<Path>) -> Result<Self, FormatError> {
        Self::read(path)
    }

    /// Opens and parses a file by memory-mapping it: a 7B model's 4 GB are not copied into RAM;
    /// tensor bytes are paged in as [`GgufFile::tensor_data`] slices are read (e.g. by an upload).
    /// On wasm32 this reads the file.
    ///
    /// # Safety
    ///
    /// The file must not be truncated or modified while the returned `GgufFile` (or any slice
    /// borrowed from it) is alive: a read of a page the file no longer has ends the process with
    /// SIGBUS, and a concurrent write changes bytes that were already validated. This is the
    /// contract of every read-only mapping; only the caller can know that no other process
    /// writes the file.
    pub unsafe fn open_mapped(path: impl AsRef<Path>) -> Result<Self, FormatError> {
        #[cfg(not(target_arch = "wasm32"))]
        {
            let path = path.as_ref();
            not_a_directory(path)?;
            let file = std::fs::File::open(path).map_err(io_at(path))?;
            if file.metadata().map_err(io_at(path))?.len() == 0 {
                return Self::from_vec(Vec::new());
            }
            // SAFETY: a read-only mapping; the caller upholds the no-truncation contract above.
            let map = unsafe { memmap2::Mmap::map(&file).map_err(io_at(path))? };
            Self::from_image(Image::Mapped(map))
        }
        #[cfg(target_arch = "wasm32")]
        Self::read(path)
    }

    /// Reads a whole file into memory and parses it.
    /// An I/O error ([`FormatError::Io`]) names the path, and a directory is reported as one.
    pub fn read(path: impl AsRef<Path>) -> Result<Self, FormatError> {
        let path = path.as_ref();
        not_a_directory(path)?;
        Self::from_vec(std::fs::read(path).map_err(io_at(path))?)
    }

    /// Format version (2 or 3).
    pub fn version(&self) -> u32 {
        self.version
    }

    /// Data alignment in bytes.
    pub fn alignment(&self) -> u64 {
        self.alignment
    }

    /// Byte offset of the data section in the file.
    pub fn data_offset(&self) -> u64 {
        self.data_offset
    }

    /// Metadata in file order.
    pub fn metadata(&self) -> &[(String, MetaValue)] {
        &self.metadata
    }

    /// The metadata value for `key`.
    pub fn get(&self, key: &str) -> Option<&MetaValue> {
        self.metadata.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    /// Tensor infos in file order.
    pub fn tensors(&self) -> &[TensorInfo] {
        &self.tensors
    }

    /// The tensor info named `name`.
    pub fn tensor(&self, name: &str) -> Option<&TensorInfo> {
        self.tensors.iter().find(|t| t.name == name)
    }

    /// The raw bytes of a tensor, bounds-checked against the data section.
    pub fn tensor_data(&self, info: &TensorInfo) -> Result<&[u8], FormatError> {
        let len = info.n_bytes.ok_or_else(|| FormatError::UnknownTensorType { name: info.name.clone(), id: info.ggml_type.id() })?;
        let file_len = self.bytes.len() as u64;
        let available = file_len.saturating_sub(self.data_offset);
        let out_of_range = || FormatError::TensorOutOfRange { name: info.name.clone(), start: info.offset, len, available };
        let end = info.offset.checked_add(len).ok_or_else(out_of_range)?;
        // The data section itself may be missing (a file cut inside the padding).
        if end > available || self.data_offset > file_len {
            return Err(out_of_range());
        }
        let start = (self.data_offset + info.offset) as usize;
        Ok(&self.bytes[start..start + len as usize])
    }
}

/// The first name that occurs twice, if any (sorts references: no copies of the names).
fn first_duplicate<'a>(names: impl Iterator<Item = &'a str>) -> Option<String> {
    let mut v: Vec<&str> = names.collect();
    v.sort_unstable();
    v.windows(2).find(|w| w[0] == w[1]).map(|w| w[0].to_string())
}

/// Bounds-checked little-endian cursor with a memory budget for what the parse keeps.
struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
    /// Bytes the parse may still allocate.
    budget: u64,
}

impl<'a> Reader<'a> {
    /// Take `bytes` from the budget before allocating them.
    fn charge(&mut self, bytes: u64) -> Result<(), FormatError> {
        match self.budget.checked_sub(bytes) {
            Some(left) => {
                self.budget = left;
                Ok(())
            }
            None => Err(FormatError::MetadataTooLarge { bytes, left: self.budget }),
        }
    }

    /// [`Reader::charge`] for `count` values of `T`.
    fn charge_items<T>(&mut self, count: u64) -> Result<(), FormatError> {
        let bytes = count.saturating_mul(std::mem::size_of::<T>() as u64);
        self.charge(bytes)
    }

    fn remaining(&self) -> u64 {
        (self.buf.len() - self.pos) as u64
    }

    fn take(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], FormatError> {
        if n as u64 > self.remaining() {
            return Err(FormatError::Truncated { what, offset: self.pos as u64 });
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    fn array<const N: usize>(&mut self, what: &'static str) -> Result<[u8; N], FormatError> {
        Ok(self.take(N, what)?.try_into().expect("N bytes"))
    }

    fn u32(&mut self, what: &'static str) -> Result<u32, FormatError> {
        Ok(u32::from_le_bytes(self.array(what)?))
    }

    fn u64(&mut self, what: &'static str) -> Result<u64, FormatError> {
        Ok(u64::from_le_bytes(self.array(what)?))
    }

    /// Errors unless `count` items of at least `min_size` bytes could fit in what remains.
    fn check_count(&self, count: u64, min_size: u64, what: &'static str) -> Result<(), FormatError> {
        match count.checked_mul(min_size) {
            Some(n) if n <= self.remaining() => Ok(()),
            _ => Err(FormatError::LengthExceedsFile { what, len: count, remaining: self.remaining() }),
        }
    }

    /// A length-prefixed UTF-8 string, borrowed from the image (not charged: nothing allocated).
    fn str(&mut self, what: &'static str) -> Result<&'a str, FormatError> {
        let len = self.u64(what)?;
        self.check_count(len, 1, what)?;
        let offset = self.pos as u64;
        let raw = self.take(len as usize, what)?;
        std::str::from_utf8(raw).map_err(|_| FormatError::InvalidUtf8 { offset })
    }

    fn string(&mut self, what: &'static str) -> Result<String, FormatError> {
        let s = self.str(what)?;
        self.charge(s.len() as u64)?;
        Ok(s.to_string())
    }

    /// An array value (element type, count, items) at nesting `depth`.
    fn array_value(&mut self, depth: usize) -> Result<MetaArray, FormatError> {
        if depth >= MAX_ARRAY_DEPTH {
            return Err(FormatError::NestingTooDeep { depth: MAX_ARRAY_DEPTH });
        }
        let elem_type = ValueType::from_id(self.u32("array element type")?)?;
        let count = self.u64("array length")?;
        self.check_count(count, elem_type.min_size(), "array length")?;
        self.array_items(elem_type, count, depth)
    }

    /// An array's items after its type and count (count already checked against the input).
    fn array_items(&mut self, elem_type: ValueType, count: u64, depth: usize) -> Result<MetaArray, FormatError> {
        const W: &str = "array item";
        self.charge_items::<u8>(count.saturating_mul(MetaArray::item_size(elem_type) as u64))?;
        let mut str_bytes = 0u64;
        if elem_type == ValueType::String {
            // First pass: the strings' total length, so the buffer is reserved once, exactly.
            let start = self.pos;
            for _ in 0..count {
                let len = self.u64(W)?;
                self.check_count(len, 1, W)?;
                self.take(len as usize, W)?;
                str_bytes += len;
            }
            self.pos = start;
            self.charge(str_bytes)?;
        }
        let mut a = MetaArray::with_capacity(elem_type, count as usize, str_bytes as usize);
        macro_rules! scalars {
            ($v:ident, $t:ty) => {
                for _ in 0..count {
                    $v.push(<$t>::from_le_bytes(self.array(W)?));
                }
            };
        }
        match &mut a {
            MetaArray::U8(v) => scalars!(v, u8),
            MetaArray::I8(v) => scalars!(v, i8),
            MetaArray::U16(v) => scalars!(v, u16),
            MetaArray::I16(v) => scalars!(v, i16),
            MetaArray::U32(v) => scalars!(v, u32),
            MetaArray::I32(v) => scalars!(v, i32),
            MetaArray::F32(v) => scalars!(v, f32),
            MetaArray::U64(v) => scalars!(v, u64),
            MetaArray::I64(v) => scalars!(v, i64),
            MetaArray::F64(v) => scalars!(v, f64),
            MetaArray::Bool(v) => {
                for _ in 0..count {
                    v.push(match self.array::<1>(W)?[0] {
                        0 => false,
                        1 => true,
                        b => return Err(FormatError::InvalidBool(b)),
                    });
                }
            }
            MetaArray::String(v) => {
                for _ in 0..count {
                    v.push(self.str(W)?);
                }
            }
            MetaArray::Array(v) => {
                for _ in 0..count {
                    v.push(self.array_value(depth + 1)?);
                }
            }
        }
        Ok(a)
    }

    fn value(&mut self, ty: ValueType, depth: usize) -> Result<MetaValue, FormatError> {
        const W: &str = "metadata value";
        Ok(match ty {
            ValueType::U8 => MetaValue::U8(self.array::<1>(W)?[0]),
            ValueType::I8 => MetaValue::I8(self.array::<1>(W)?[0] as i8),
            ValueType::U16 => MetaValue::U16(u16::from_le_bytes(self.array(W)?)),
            ValueType::I16 => MetaValue::I16(i16::from_le_bytes(self.array(W)?)),
            ValueType::U32 => MetaValue::U32(u32::from_le_bytes(self.array(W)?)),
            ValueType::I32 => MetaValue::I32(i32::from_le_bytes(self.array(W)?)),
            ValueType::F32 => MetaValue::F32(f32::from_le_bytes(self.array(W)?)),
            ValueType::U64 => MetaValue::U64(u64::from_le_bytes(self.array(W)?)),
            ValueType::I64 => MetaValue::I64(i64::from_le_bytes(self.array(W)?)),
            ValueType::F64 => MetaValue::F64(f64::from_le_bytes(self.array(W)?)),
            ValueType::Bool => match self.array::<1>(W)?[0] {
                0 => MetaValue::Bool(false),
                1 => MetaValue::Bool(true),
                b => return Err(FormatError::InvalidBool(b)),
            },
            ValueType::String => MetaValue::String(self.string("metadata string")?),
            ValueType::Array => MetaValue::Array(self.array_value(depth)?),
        })
    }

    fn tensor_info(&mut self) -> Result<TensorInfo, FormatError> {
        let name = self.string("tensor name")?;
        let n_dims = self.u32("tensor n_dims")?;
        if n_dims > MAX_DIMS {
            return Err(FormatError::TooManyDims { name, n_dims });
        }
        self.charge_items::<u64>(n_dims as u64)?;
        let mut dims = Vec::with_capacity(n_dims as usize);
        for _ in 0..n_dims {
            dims.push(self.u64("tensor dimension")?);
        }
        let ggml_type = GgmlType::from_id(self.u32("tensor type")?);
        let offset = self.u64("tensor offset")?;
        // ggml stores sizes as int64, so anything above i64::MAX is corrupt too.
        let n_elements =
            dims.iter().try_fold(1u64, |acc, &d| acc.checked_mul(d)).filter(|&n| n <= i64::MAX as u64).ok_or_else(|| FormatError::ShapeOverflow { name: name.clone() })?;
        let n_bytes = match ggml_type.block_size() {
            None => None,
            Some((blk, bytes)) => {
                let ne0 = dims.first().copied().unwrap_or(1);
                if ne0 % blk != 0 {
                    return Err(FormatError::BadTensorShape { name, ne0, block: blk });
                }
                let n = (n_elements / blk).checked_mul(bytes).ok_or_else(|| FormatError::ShapeOverflow { name: name.clone() })?;
                Some(n)
            }
        };
        Ok(TensorInfo { name, dims, ggml_type, offset, n_elements, n_bytes })
    }
}

#[cfg(test)]
mod tests;
