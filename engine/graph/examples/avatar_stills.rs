//! Writes stills of every stock face mid-word, at rest and mid-blink, as PNG files for reviewers:
//! `cargo run -p confab-engine --example avatar_stills -- docs/avatars [PICTURE…]` (pictures are
//! rigged as custom avatars first). The audio is real speech from
//! espeak-ng; each still is the frame the renderer draws for the 40 ms of audio at that moment.

use std::path::PathBuf;
use std::process::Command;

use confab_engine::MediaTime;
use confab_engine::audio::wav;
use confab_engine::avatar::from_image::AvatarBuilder;
use confab_engine::avatar::stock::{STOCK, stock_face};
use confab_engine::avatar::{AvatarRenderer, FRAME_SAMPLES, FaceRig, RgbImage};

fn main() {
    let dir = PathBuf::from(std::env::args().nth(1).unwrap_or_else(|| "docs/avatars".into()));
    std::fs::create_dir_all(&dir).expect("the output directory");
    let speech_path = std::env::temp_dir().join(format!("confab-stills-{}.wav", std::process::id()));
    let status = Command::new("espeak-ng")
        .args(["-v", "en-us", "-s", "150", "-w"])
        .arg(&speech_path)
        .arg("Hello, I am your assistant. How can I help?")
        .status()
        .expect("espeak-ng is installed (scripts/setup.sh)");
    assert!(status.success());
    let speech = wav::read_mono_16k(&speech_path).expect("espeak-ng's WAV");
    let _ = std::fs::remove_file(&speech_path);
    for (id, _) in STOCK {
        let (portrait, rig) = stock_face(id, 512).expect("a stock face");
        stills(&dir, id, &portrait, &rig, &speech);
    }
    // Further arguments: pictures rigged as custom avatars (e.g. the test fixtures of scripts/fixtures.sh).
    let models = confab_models::default_models_dir();
    for picture in std::env::args().skip(2) {
        let mut builder = AvatarBuilder::load(&models).expect("run `confab models fetch`");
        let bytes = std::fs::read(&picture).expect("the picture");
        let started = std::time::Instant::now();
        let rigged = builder.build(&bytes, 512).unwrap_or_else(|err| panic!("{picture}: {err}"));
        println!("{picture}: rigged in {:.0} ms", started.elapsed().as_secs_f64() * 1e3);
        let stem = std::path::Path::new(&picture).file_stem().unwrap().to_string_lossy().replace('_', "-");
        println!("{picture}: rig from {:?}", rigged.source);
        stills(&dir, &format!("custom-{stem}"), &rigged.portrait, &rigged.rig, &speech);
    }
}

/// Writes `{name}-rest.png`, two frames mid-word, `{name}-word{1,2}.png`, and the most shut frame of
/// the first blink, `{name}-blink.png`.
fn stills(dir: &std::path::Path, name: &str, portrait: &RgbImage, rig: &FaceRig, speech: &[f32]) {
    let frame = FRAME_SAMPLES as usize;
    write_png(&dir.join(format!("{name}-rest.png")), portrait);
    write_png(&dir.join(format!("{name}-blink.png")), &most_shut(portrait, rig));
    let mut renderer = AvatarRenderer::new(portrait.clone(), rig.clone(), 1);
    // The three most open frames of the sentence, each after the frames that lead to it.
    let mut shapes: Vec<(usize, f32)> = Vec::new();
    for (index, audio) in speech.chunks(frame).enumerate() {
        let (_, shape) = renderer.render(MediaTime((index * frame) as u64), audio);
        shapes.push((index, shape.open));
    }
    shapes.sort_by(|a, b| b.1.total_cmp(&a.1));
    for (rank, &(wanted, open)) in shapes.iter().step_by(7).take(2).enumerate() {
        let mut renderer = AvatarRenderer::new(portrait.clone(), rig.clone(), 1);
        let mut last = None;
        for (index, audio) in speech.chunks(frame).enumerate().take(wanted + 1) {
            last = Some(renderer.render(MediaTime((index * frame) as u64), audio).0.clone());
        }
        let path = dir.join(format!("{name}-word{}.png", rank + 1));
        write_png(&path, &last.expect("a frame"));
        println!("{} (frame {wanted}, open {open:.2})", path.display());
    }
}

/// The frame of seven silent seconds whose first eye differs most from the portrait's (a blink).
fn most_shut(portrait: &RgbImage, rig: &FaceRig) -> RgbImage {
    let mut renderer = AvatarRenderer::new(portrait.clone(), rig.clone(), 1).without_idle_motion();
    let eye = rig.eyes[0];
    let (x0, x1) = ((eye.center.0 - eye.half_width) as usize, (eye.center.0 + eye.half_width) as usize);
    let (y0, y1) = ((eye.center.1 - eye.half_height) as usize, (eye.center.1 + eye.half_height) as usize);
    let silence = vec![0.0; FRAME_SAMPLES as usize];
    let mut best = (0u64, portrait.clone());
    for index in 0..175u64 {
        let (image, _) = renderer.render(MediaTime(index * FRAME_SAMPLES), &silence);
        let difference: u64 = (y0..y1)
            .flat_map(|y| (x0..x1).map(move |x| (x, y)))
            .map(|(x, y)| {
                let (a, b) = (image.pixel(x, y), portrait.pixel(x, y));
                (0..3).map(|c| u64::from(a[c].abs_diff(b[c]))).sum::<u64>()
            })
            .sum();
        if difference > best.0 {
            best = (difference, image.clone());
        }
    }
    best.1
}

fn write_png(path: &std::path::Path, image: &RgbImage) {
    let file = std::io::BufWriter::new(std::fs::File::create(path).expect("the PNG file"));
    let mut encoder = png::Encoder::new(file, image.width as u32, image.height as u32);
    encoder.set_color(png::ColorType::Rgb);
    encoder.set_depth(png::BitDepth::Eight);
    encoder.write_header().and_then(|mut w| w.write_image_data(&image.rgb)).expect("PNG written");
}
