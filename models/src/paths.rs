//! Where each model file lives under the models directory: what `registry` stores there (and what the
//! fetch makes from it), and what the loaders open.

pub const ONNXRUNTIME_LIBRARY: &str = "onnxruntime/libonnxruntime.so.1.31.1";
pub const SILERO_VAD: &str = "silero-vad/silero_vad.onnx";
pub const SMART_TURN: &str = "smart-turn/smart-turn-v3.2-cpu.onnx";
/// Made from `SMART_TURN` at fetch time (`smart_turn::prepare`): each GELU one operator.
pub const SMART_TURN_PREPARED: &str = "smart-turn/smart-turn-v3.2-cpu.prepared.onnx";
pub const WHISPER_CT2: &str = "whisper-tiny.en/ct2-model.bin";
pub const WHISPER_TOKENIZER: &str = "whisper-tiny.en/tokenizer.json";
pub const WHISPER_CONFIG: &str = "whisper-tiny.en/config.json";
/// Made from `WHISPER_CT2` at fetch time.
pub const WHISPER_SAFETENSORS: &str = "whisper-tiny.en/model.safetensors";
pub const MOONSHINE_ENCODER: &str = "moonshine-base/encoder_model.ort";
pub const MOONSHINE_DECODER: &str = "moonshine-base/decoder_model_merged.ort";
pub const MOONSHINE_TOKENIZER: &str = "moonshine-base/tokenizer.json";
/// Made from `MOONSHINE_ENCODER` and `MOONSHINE_DECODER` at fetch time (`moonshine::convert`).
pub const MOONSHINE_ENCODER_ONNX: &str = "moonshine-base/encoder_model.onnx";
pub const MOONSHINE_DECODER_ONNX: &str = "moonshine-base/decoder_model_merged.onnx";
pub const SMOLLM2: &str = "smollm2/SmolLM2-135M-Instruct.Q4_1.gguf";
/// Made from `SMOLLM2` at fetch time (`chat_lm::requantize`): the same model with Q8_0 weights.
pub const SMOLLM2_Q8: &str = "smollm2/SmolLM2-135M-Instruct.Q8_0.gguf";
/// Qwen2.5-Coder-0.5B-Instruct's Q4_K_M GGUF, split in six by its packages (joined at fetch time).
pub const QWEN_CODER_PARTS: [&str; 6] = [
    "qwen2.5-coder-0.5b/part01.bin",
    "qwen2.5-coder-0.5b/part02.bin",
    "qwen2.5-coder-0.5b/part03.bin",
    "qwen2.5-coder-0.5b/part04.bin",
    "qwen2.5-coder-0.5b/part05.bin",
    "qwen2.5-coder-0.5b/part06.bin",
];
/// Made from `QWEN_CODER_PARTS` at fetch time (`chat_lm::requantize`): joined, Q5_0 weights as Q8_0.
pub const QWEN_CODER_Q8: &str = "qwen2.5-coder-0.5b/qwen2.5-coder-0.5b-instruct.q8.gguf";
pub const FACE_DETECTOR_TFLITE: &str = "face/face_detection_short_range.tflite";
pub const FACE_LANDMARKS_TFLITE: &str = "face/face_landmark.tflite";
/// Made from `FACE_DETECTOR_TFLITE` at fetch time (NCHW float input, 1×3×128×128 in −1…1).
pub const FACE_DETECTOR: &str = "face/face_detection_short_range.onnx";
/// Made from `FACE_LANDMARKS_TFLITE` at fetch time (NCHW float input, 1×3×192×192 in 0…1).
pub const FACE_LANDMARKS: &str = "face/face_landmark.onnx";
pub const PIPER_JOE: &str = "piper/en_US-joe-medium.onnx";
pub const PIPER_JOE_CONFIG: &str = "piper/en_US-joe-medium.onnx.json";
/// The voice's text encoder, durations and flow (phoneme ids → the latent frames), split from
/// [`PIPER_JOE`] at fetch time (`piper::split`).
pub const PIPER_JOE_ENCODER: &str = "piper/en_US-joe-medium.encoder.onnx";
/// The voice's decoder (latent frames → audio), split from [`PIPER_JOE`] at fetch time.
pub const PIPER_JOE_DECODER: &str = "piper/en_US-joe-medium.decoder.onnx";
/// Resemblyzer's GE2E voice encoder (a legacy PyTorch checkpoint, read as it is: `voice_encoder`).
pub const VOICE_ENCODER: &str = "voice-encoder/resemblyzer-pretrained.pt";

pub const MINILM_TOKENIZER: &str = "all-minilm-l6-v2/tokenizer.json";
/// all-MiniLM-L6-v2 exported to ONNX with int8 weights.
pub const MINILM_MODEL: &str = "all-minilm-l6-v2/model-int8.onnx";
