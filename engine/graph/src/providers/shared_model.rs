//! Loaded models shared by every call of the process: a model is loaded once per key (its models
//! directory, and its name where there are several) and handed out behind an `Arc` afterwards.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{Arc, Mutex};

/// The loaded models of one kind, by key.
pub type SharedModels<K, T> = Mutex<HashMap<K, Arc<T>>>;

/// The model under `key`, loaded with `load` the first time. Loading holds the map's lock, so two calls
/// asking at once load it once.
pub fn get_or_load<K: Eq + Hash, T, E>(
    models: &SharedModels<K, T>,
    key: K,
    load: impl FnOnce() -> Result<T, E>,
) -> Result<Arc<T>, E> {
    let mut models = models.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some(model) = models.get(&key) {
        return Ok(model.clone());
    }
    let model = Arc::new(load()?);
    models.insert(key, model.clone());
    Ok(model)
}
