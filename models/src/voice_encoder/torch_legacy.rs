//! Reads the tensors of a PyTorch checkpoint in the legacy (pre-1.6, not zip) format — what
//! `torch.save(..., _use_new_zipfile_serialization=False)` writes and Resemblyzer's `pretrained.pt` is:
//! a magic number, a protocol version and system information (three small pickles), the checkpoint's
//! own pickle whose tensors name their storages by key, the keys in storage order (a fourth pickle),
//! then each storage as an element count and its little-endian data. The pickles are read by candle's
//! unpickler, which builds objects and runs no code.

use std::collections::HashMap;
use std::io::BufRead;

use candle_core::pickle::{Object, Stack};

/// `0x1950a86a20f9469cfc6c` as pickled: PROTO 2, LONG1 of 10 bytes (little-endian), STOP.
const MAGIC: [u8; 15] = [0x80, 0x02, 0x8a, 0x0a, 0x6c, 0xfc, 0x9c, 0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19, 0x2e];

/// One tensor: its shape and its values in row-major order.
#[derive(Debug, Clone, PartialEq)]
pub struct Tensor {
    pub shape: Vec<usize>,
    pub values: Vec<f32>,
}

/// Where a tensor's values are: its storage's key, the offset in elements, its shape and strides.
struct TensorRef {
    storage: String,
    offset: usize,
    shape: Vec<usize>,
    stride: Vec<usize>,
}

/// The float tensors of the dictionary `entry` of the checkpoint (e.g. `model_state`), by name.
pub fn read_state_dict(reader: &mut impl BufRead, entry: &str) -> Result<HashMap<String, Tensor>, String> {
    let mut magic = [0u8; MAGIC.len()];
    reader.read_exact(&mut magic).map_err(|e| format!("cannot read the header: {e}"))?;
    if magic != MAGIC {
        return Err("not a legacy PyTorch checkpoint (its magic number differs)".into());
    }
    unpickle(reader).map_err(|e| format!("protocol version: {e}"))?;
    unpickle(reader).map_err(|e| format!("system information: {e}"))?;
    let checkpoint = unpickle(reader).map_err(|e| format!("checkpoint: {e}"))?;
    let keys = match unpickle(reader).map_err(|e| format!("storage keys: {e}"))? {
        Object::List(keys) => keys.into_iter().map(unicode).collect::<Result<Vec<_>, _>>()?,
        other => return Err(format!("storage keys: expected a list, got {other:?}")),
    };
    let mut element_sizes = HashMap::new();
    collect_storages(&checkpoint, &mut element_sizes);
    let state = dict_entry(checkpoint, entry)?;
    let tensors: Vec<(String, TensorRef)> = match state {
        Object::Dict(items) => items
            .into_iter()
            .map(|(name, value)| Ok((unicode(name)?, value)))
            // A state dict's `_metadata` (module versions) arrives as one of its items.
            .filter(|item| !matches!(item, Ok((name, _)) if name == "_metadata"))
            .map(|item| item.and_then(|(name, value)| Ok((name, tensor_ref(value)?))))
            .collect::<Result<_, String>>()?,
        other => return Err(format!("`{entry}` is not a dictionary: {other:?}")),
    };
    let wanted: HashMap<&str, ()> = tensors.iter().map(|(_, t)| (t.storage.as_str(), ())).collect();
    let mut storages = HashMap::new();
    for key in &keys {
        let size = *element_sizes.get(key).ok_or_else(|| format!("storage {key} is not used by any tensor"))?;
        let mut count = [0u8; 8];
        reader.read_exact(&mut count).map_err(|e| format!("storage {key}: {e}"))?;
        let bytes = usize::try_from(i64::from_le_bytes(count)).map_err(|_| format!("storage {key}: bad size"))? * size;
        let mut data = vec![0u8; bytes];
        reader.read_exact(&mut data).map_err(|e| format!("storage {key}: {e}"))?;
        if wanted.contains_key(key.as_str()) {
            if size != 4 {
                return Err(format!("storage {key} of `{entry}` is not 32-bit float"));
            }
            let values: Vec<f32> = data.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect();
            storages.insert(key.clone(), values);
        }
    }
    tensors
        .into_iter()
        .map(|(name, t)| {
            let storage =
                storages.get(&t.storage).ok_or_else(|| format!("{name}: storage {} is missing", t.storage))?;
            Ok((name.clone(), gather(storage, &t).ok_or_else(|| format!("{name}: outside its storage"))?))
        })
        .collect()
}

fn unpickle(reader: &mut impl BufRead) -> Result<Object, String> {
    let mut stack = Stack::empty();
    stack.read_loop(reader).map_err(|e| e.to_string())?;
    stack.finalize().map_err(|e| e.to_string())
}

fn unicode(object: Object) -> Result<String, String> {
    object.unicode().map_err(|other| format!("expected a string, got {other:?}"))
}

fn dict_entry(object: Object, entry: &str) -> Result<Object, String> {
    let Object::Dict(items) = object else { return Err("the checkpoint is not a dictionary".into()) };
    items
        .into_iter()
        .find(|(key, _)| matches!(key, Object::Unicode(k) if k == entry))
        .map(|(_, value)| value)
        .ok_or_else(|| format!("the checkpoint has no `{entry}`"))
}

/// Every storage named anywhere in `object`, with its element size in bytes.
fn collect_storages(object: &Object, sizes: &mut HashMap<String, usize>) {
    match object {
        Object::PersistentLoad(id) => {
            if let Object::Tuple(parts) = id.as_ref()
                && let [_, Object::Class { class_name, .. }, Object::Unicode(key), ..] = parts.as_slice()
            {
                let size = match class_name.as_str() {
                    "DoubleStorage" | "LongStorage" => 8,
                    "FloatStorage" | "IntStorage" => 4,
                    "HalfStorage" | "BFloat16Storage" | "ShortStorage" => 2,
                    _ => 1,
                };
                sizes.insert(key.clone(), size);
            }
        }
        Object::Tuple(items) | Object::List(items) => items.iter().for_each(|item| collect_storages(item, sizes)),
        Object::Dict(items) => items.iter().for_each(|(key, value)| {
            collect_storages(key, sizes);
            collect_storages(value, sizes);
        }),
        Object::Reduce { callable, args } | Object::Build { callable, args } => {
            collect_storages(callable, sizes);
            collect_storages(args, sizes);
        }
        _ => {}
    }
}

/// `torch._utils._rebuild_tensor_v2(storage, offset, size, stride, ...)`.
fn tensor_ref(object: Object) -> Result<TensorRef, String> {
    let not_a_tensor = |what: &Object| format!("not a tensor: {what:?}");
    let Object::Reduce { callable, args } = &object else { return Err(not_a_tensor(&object)) };
    if !matches!(callable.as_ref(), Object::Class { class_name, .. } if class_name == "_rebuild_tensor_v2") {
        return Err(not_a_tensor(&object));
    }
    let Object::Tuple(args) = args.as_ref() else { return Err(not_a_tensor(&object)) };
    let [Object::PersistentLoad(id), offset, shape, stride, ..] = args.as_slice() else {
        return Err(not_a_tensor(&object));
    };
    let Object::Tuple(id) = id.as_ref() else { return Err(not_a_tensor(&object)) };
    let Some(Object::Unicode(storage)) = id.get(2) else { return Err(not_a_tensor(&object)) };
    let int = |o: &Object| match o {
        Object::Int(i) => usize::try_from(*i).ok(),
        Object::Long(i) => usize::try_from(*i).ok(),
        _ => None,
    };
    let ints = |o: &Object| match o {
        Object::Tuple(items) => items.iter().map(int).collect::<Option<Vec<_>>>(),
        _ => None,
    };
    Ok(TensorRef {
        storage: storage.clone(),
        offset: int(offset).ok_or_else(|| not_a_tensor(&object))?,
        shape: ints(shape).ok_or_else(|| not_a_tensor(&object))?,
        stride: ints(stride).ok_or_else(|| not_a_tensor(&object))?,
    })
}

/// The tensor's values in row-major order, whatever its strides.
fn gather(storage: &[f32], t: &TensorRef) -> Option<Tensor> {
    let count: usize = t.shape.iter().product();
    let mut values = Vec::with_capacity(count);
    let mut index = vec![0usize; t.shape.len()];
    for _ in 0..count {
        let at = t.offset + index.iter().zip(&t.stride).map(|(i, s)| i * s).sum::<usize>();
        values.push(*storage.get(at)?);
        for axis in (0..index.len()).rev() {
            index[axis] += 1;
            if index[axis] < t.shape[axis] {
                break;
            }
            index[axis] = 0;
        }
    }
    Some(Tensor { shape: t.shape.clone(), values })
}
