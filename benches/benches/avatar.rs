//! The avatar's cost per video frame at 512×512, 25 fps, on real speech (espeak-ng): the renderer
//! (mouth warp, inner mouth, blinks), RGB→I420, VP8 encoding (libvpx, real time, cpu-used −6), and the
//! three together (as calls do it: only the changed macroblocks coded; and, to compare, every macroblock
//! searched). Streams per core = 40 ms / (render + convert + encode), from the measured mean. The same
//! for a custom avatar rigged from a photo (the public-domain astronaut of `scripts/fixtures.sh`), and
//! what rigging that photo costs once per upload (face detection, landmarks, rig).
//!
//! `cargo bench -p confab-benches --bench avatar -- --warm-up-time 2 --measurement-time 5`

use confab_benches::espeak;
use confab_engine::MediaTime;
use confab_engine::avatar::from_image::AvatarBuilder;
use confab_engine::avatar::stock::stock_face;
use confab_engine::avatar::{AvatarRenderer, FRAME_SAMPLES};
use confab_engine::video::face_encoder::FaceEncoder;
use confab_engine::video::vp8::{Vp8Config, Vp8Encoder};
use confab_engine::video::yuv::I420;
use criterion::{Criterion, criterion_group, criterion_main};

fn speech() -> Vec<f32> {
    espeak("Hello there, I can help you book a table for dinner tonight at seven.", 160)
}

fn avatar(c: &mut Criterion) {
    let audio = speech();
    let frames: Vec<&[f32]> = audio.chunks_exact(FRAME_SAMPLES as usize).collect();
    let (portrait, rig) = stock_face("stock-sofia", 512).unwrap();
    let mut group = c.benchmark_group("avatar 512x512");

    bench_render(&mut group, "render (speaking)", AvatarRenderer::new(portrait.clone(), rig.clone(), 1), &frames);

    let mut picture = I420::new(512, 512);
    group.bench_function("RGB to I420, whole frame", |b| b.iter(|| picture.convert(&portrait)));
    // The regions of a frame between two head poses (the mouth's and the eyes' boxes).
    let mut still = AvatarRenderer::new(portrait.clone(), rig.clone(), 1);
    still.render(MediaTime::ZERO, frames[0]);
    still.render(MediaTime(FRAME_SAMPLES), frames[1]);
    let regions = still.changed_regions().to_vec();
    group.bench_function("RGB to I420, redrawn regions", |b| {
        b.iter(|| regions.iter().for_each(|&region| picture.convert_region(&portrait, region)))
    });

    // The same with every macroblock searched by VP8 (no active map): what the active map saves.
    let mut renderer = AvatarRenderer::new(portrait.clone(), rig.clone(), 1);
    let mut encoder = Vp8Encoder::new(Vp8Config::default()).unwrap();
    encoder.picture().convert(&portrait);
    let mut index = 0usize;
    group.bench_function("render + I420 + VP8 encode, every macroblock searched", |b| {
        b.iter(|| {
            let at = MediaTime((index * FRAME_SAMPLES as usize) as u64);
            renderer.render(at, frames[index % frames.len()]);
            for &region in renderer.changed_regions() {
                encoder.picture().convert_region(renderer.frame(), region);
            }
            index += 1;
            encoder.encode().unwrap().data.len()
        })
    });

    let face = FaceEncoder::new("stock-sofia", Vp8Config::default(), 1).unwrap();
    bench_face(&mut group, "render + I420 + VP8 encode", face, &frames);

    // A custom avatar: the photo rigged once (what an upload costs), then its frames as a call draws them.
    let photo = std::fs::read(fixtures_dir().join("astronaut.png")).expect("run ./scripts/fixtures.sh");
    let mut builder = AvatarBuilder::load(&confab_models::default_models_dir()).expect("run `confab models fetch`");
    group.bench_function("rig a photo (detect, landmarks, rig), once per upload", |b| {
        b.iter(|| builder.build(&photo, 512).unwrap().rig.mouth_half_width)
    });
    let rigged = builder.build(&photo, 512).unwrap();
    let renderer = AvatarRenderer::new(rigged.portrait.clone(), rigged.rig.clone(), 1);
    bench_render(&mut group, "render (speaking), custom avatar (photo)", renderer, &frames);
    let face = FaceEncoder::with_portrait(rigged.portrait, rigged.rig, Vp8Config::default(), 1).unwrap();
    bench_face(&mut group, "render + I420 + VP8 encode, custom avatar (photo)", face, &frames);
    group.finish();
}

/// `renderer`'s frames, one per 40 ms of `frames` in turn, drawn only.
fn bench_render(
    group: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    name: &str,
    mut renderer: AvatarRenderer,
    frames: &[&[f32]],
) {
    let mut index = 0usize;
    group.bench_function(name, |b| {
        b.iter(|| {
            let at = MediaTime((index * FRAME_SAMPLES as usize) as u64);
            let (frame, _) = renderer.render(at, frames[index % frames.len()]);
            index += 1;
            frame.rgb[0]
        })
    });
}

/// `face`'s frames as a call encodes them, one per 40 ms of `frames` in turn.
fn bench_face(
    group: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    name: &str,
    mut face: FaceEncoder,
    frames: &[&[f32]],
) {
    let mut index = 0usize;
    group.bench_function(name, |b| {
        b.iter(|| {
            let (frame, _) = face.encode(frames[index % frames.len()]).unwrap();
            index += 1;
            frame.data.len()
        })
    });
}

/// Where `scripts/fixtures.sh` put the test pictures.
fn fixtures_dir() -> std::path::PathBuf {
    std::env::var_os("CONFAB_FIXTURES_DIR").map(std::path::PathBuf::from).unwrap_or_else(|| {
        std::path::PathBuf::from(std::env::var_os("HOME").expect("HOME")).join(".cache/confab/fixtures")
    })
}

criterion_group!(benches, avatar);
criterion_main!(benches);
