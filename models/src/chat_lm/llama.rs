//! The process's llama.cpp: its backend (initialised once), its log (sent to `tracing`; the last error a
//! load wrote on this thread is kept, for the reason a file is refused), and the models loaded from files —
//! each file once per process, its weights mapped once and shared by every context (every call) that runs
//! it.

use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::{CStr, c_char, c_void};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, Once, OnceLock, PoisonError, RwLock};

use llama_cpp_2::llama_backend::LlamaBackend;
use llama_cpp_2::model::LlamaModel;
use llama_cpp_2::model::params::LlamaModelParams;

thread_local! {
    /// The first error llama.cpp logged on this thread since `clear_error` (the cause; what follows it is
    /// "failed to load model").
    static FIRST_ERROR: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// llama.cpp's log, line by line: errors as warnings (the first kept for [`take_error`]), the rest at trace level
/// (it narrates every load in detail).
unsafe extern "C" fn log_line(level: llama_cpp_sys_2::ggml_log_level, text: *const c_char, _: *mut c_void) {
    if text.is_null() {
        return;
    }
    // SAFETY: llama.cpp passes a NUL-terminated string that lives for the call.
    let text = unsafe { CStr::from_ptr(text) }.to_string_lossy();
    let line = text.trim();
    if line.is_empty() {
        return;
    }
    if level == llama_cpp_sys_2::GGML_LOG_LEVEL_ERROR {
        tracing::warn!(target: "llama_cpp", "{line}");
        FIRST_ERROR.with(|first| {
            first.borrow_mut().get_or_insert_with(|| line.to_string());
        });
    } else {
        tracing::trace!(target: "llama_cpp", "{line}");
    }
}

/// The process's llama.cpp backend, initialised on first use with its log sent to ours.
pub(super) fn backend() -> &'static LlamaBackend {
    static BACKEND: OnceLock<LlamaBackend> = OnceLock::new();
    BACKEND.get_or_init(|| {
        // SAFETY: a plain function with no user data, set before any other llama.cpp call.
        unsafe {
            llama_cpp_sys_2::llama_log_set(Some(log_line), std::ptr::null_mut());
            llama_cpp_sys_2::ggml_log_set(Some(log_line), std::ptr::null_mut());
        }
        let backend = LlamaBackend::init().expect("llama.cpp's backend is initialised only here");
        tracing::info!(kernels = %system_info(), "llama.cpp runs the local language model");
        backend
    })
}

/// The CPU features llama.cpp's kernels were built with ("CPU : SSE3 = 1 | AVX = 1 | AVX2 = 1 | …").
pub fn system_info() -> String {
    // SAFETY: llama.cpp returns a pointer to its own static, NUL-terminated buffer.
    let info = unsafe { CStr::from_ptr(llama_cpp_sys_2::llama_print_system_info()) };
    info.to_string_lossy().trim().to_string()
}

/// Forgets the error llama.cpp logged on this thread (before a call whose failure it would explain).
pub(super) fn clear_error() {
    FIRST_ERROR.with(|last| last.borrow_mut().take());
}

/// The first error llama.cpp logged on this thread since [`clear_error`], without its function-name prefix
/// ("llama_model_load: error loading model: …" → "error loading model: …").
pub(super) fn take_error() -> Option<String> {
    let line = FIRST_ERROR.with(|last| last.borrow_mut().take())?;
    let words =
        line.split_once(": ").filter(|(prefix, _)| !prefix.contains(' ')).map_or(line.as_str(), |(_, rest)| rest);
    Some(words.to_string())
}

/// Decodes in progress, against the process's exit: each holds a read lock; at exit the write lock is
/// taken (waiting for the decodes under way) and never given back (no decode starts after it).
static DECODING: RwLock<()> = RwLock::new(());

/// Runs `decode` (a `llama_decode`) so that the process cannot exit during it. The model runs on threads
/// of its own that outlive `main`; when the process exits, the C++ statics llama.cpp's CPU backend
/// computes with (its extra buffer types, their kernels) are destroyed by the exit handlers, and a decode
/// still running on another thread then crashed the process on its way out (seen as SIGSEGV in
/// `ggml_cpu_extra_compute_forward` on an AVX-512 host, after a benchmark's last reply, while the next
/// message's opening was being evaluated).
pub(super) fn decoding<T>(decode: impl FnOnce() -> T) -> T {
    let result = {
        let _decoding = DECODING.read().unwrap_or_else(PoisonError::into_inner);
        decode()
    };
    // Registered after the first decode: exit handlers run last-registered first, so this one runs
    // before the destructors of the statics that decode constructed.
    static WAIT_AT_EXIT: Once = Once::new();
    WAIT_AT_EXIT.call_once(|| {
        // SAFETY: a plain function with no arguments, as `atexit` takes.
        if unsafe { libc::atexit(wait_for_decodes) } != 0 {
            tracing::warn!("cannot ask to wait for llama.cpp's decodes at exit");
        }
    });
    result
}

/// At exit: waits for the decodes under way to end, and lets none start.
extern "C" fn wait_for_decodes() {
    std::mem::forget(DECODING.write().unwrap_or_else(PoisonError::into_inner));
}

/// The model in `path`, loaded on its first use in the process and kept for the process's life (its
/// weights mapped from the file, not copied). Err: llama.cpp's own reason, when it logged one.
pub(super) fn model(path: &Path) -> Result<&'static LlamaModel, String> {
    static LOADED: OnceLock<Mutex<HashMap<PathBuf, &'static LlamaModel>>> = OnceLock::new();
    let key = path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
    let mut loaded = LOADED.get_or_init(Default::default).lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some(model) = loaded.get(&key) {
        return Ok(model);
    }
    clear_error();
    let model = LlamaModel::load_from_file(backend(), &key, &LlamaModelParams::default())
        .map_err(|err| take_error().unwrap_or_else(|| err.to_string()))?;
    let model: &'static LlamaModel = Box::leak(Box::new(model));
    loaded.insert(key, model);
    Ok(model)
}

/// Whether llama.cpp can load `path`: its architecture is one llama.cpp knows, its hyperparameters and
/// tokenizer are complete, and it holds every tensor the architecture needs, each of the right shape. The
/// weights are neither read nor allocated (llama.cpp's `no_alloc` load). Err: llama.cpp's reason.
pub(super) fn check_loads(path: &Path) -> Result<(), String> {
    clear_error();
    let params = LlamaModelParams::default().with_no_alloc(true);
    LlamaModel::load_from_file(backend(), path, &params)
        .map(drop)
        .map_err(|err| take_error().unwrap_or_else(|| err.to_string()))
}

/// The `llama_context` behind a `LlamaContext` (`context_pointer`), for what the binding does not offer.
pub(super) struct RawContext(std::ptr::NonNull<llama_cpp_sys_2::llama_context>);

// SAFETY: the `LlamaContext` it was read from is `Send`, and the two move together (`ChatLm` owns both).
unsafe impl Send for RawContext {}

impl RawContext {
    /// Runs the context's next batches on `threads` threads (when it does not already).
    pub(super) fn set_threads(&mut self, threads: i32) {
        // SAFETY: the pointer is the live context's (confirmed by `context_pointer`); its owner holds it
        // mutably while this runs.
        unsafe {
            if llama_cpp_sys_2::llama_n_threads(self.0.as_ptr()) != threads {
                llama_cpp_sys_2::llama_set_n_threads(self.0.as_ptr(), threads, threads);
            }
        }
    }
}

/// The `llama_context` behind `context`, for what `llama-cpp-2` (pinned at =0.1.160) does not offer:
/// setting the threads of a context it made (`llama_set_n_threads`). The binding keeps the pointer to
/// itself but prints it (`LlamaContext { context: 0x… }`); the pointer read there is used only when
/// llama.cpp confirms it is that context (the threads it was made with, its positions). None when the
/// print has no pointer: the context then keeps the threads it was made with. Upgrading the binding means
/// checking that it still prints this (the test `the_model_takes_the_cores_left` in `engine/graph/tests/local_llm.rs`
/// fails otherwise), or using its own setter if it has one by then.
pub(super) fn context_pointer(context: &llama_cpp_2::context::LlamaContext<'_>, threads: i32) -> Option<RawContext> {
    let printed = format!("{context:?}");
    let hex = printed.split("context: 0x").nth(1)?;
    let digits: String = hex.chars().take_while(char::is_ascii_hexdigit).collect();
    let address = usize::from_str_radix(&digits, 16).ok()?;
    let raw = std::ptr::NonNull::new(address as *mut llama_cpp_sys_2::llama_context)?;
    // SAFETY: the address is the one the binding printed for `context`, alive while it is; llama.cpp only
    // reads two of its fields here.
    let (made_with, positions) =
        unsafe { (llama_cpp_sys_2::llama_n_threads(raw.as_ptr()), llama_cpp_sys_2::llama_n_ctx(raw.as_ptr())) };
    (made_with == threads && positions == context.n_ctx()).then_some(RawContext(raw))
}
