//! A face rig: the landmarks a portrait's face is animated by (mouth, lips, jaw, eyes) and the triangle
//! mesh over the lower face that the renderer warps. The mesh is a set of elliptical rings around the
//! mouth: the inner lip line (which opens), the outer lip edge, the cheeks and jaw, and a fixed anchor
//! ring. The anchor never moves, so everything outside it is the untouched portrait: no seams.

/// A point in portrait pixels.
pub type Point = (f32, f32);

/// One eye, as an ellipse, and what its lid looks like when it closes.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct EyeRig {
    pub center: Point,
    pub half_width: f32,
    pub half_height: f32,
    /// The eyelid's skin colour.
    pub lid: [u8; 3],
    /// The lash line drawn along the closing lid.
    pub lash: [u8; 3],
}

/// Landmarks of one portrait, in its pixels.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct FaceRig {
    /// Where the lips meet, at the middle.
    pub mouth_center: Point,
    /// Half the distance between the mouth corners.
    pub mouth_half_width: f32,
    /// Height of each lip.
    pub lip_height: f32,
    /// The chin's lowest point.
    pub chin: Point,
    /// Half the width of the face at the mouth (the jaw line).
    pub jaw_half_width: f32,
    /// The tip of the nose (the upper limit of the mesh).
    pub nose_tip: Point,
    pub eyes: [EyeRig; 2],
    /// Inside the open mouth, and the upper teeth.
    pub mouth_interior: [u8; 3],
    pub teeth: [u8; 3],
}

/// Angular steps around each ring.
pub const SEGMENTS: usize = 24;
/// Rings from the inner lip line outwards.
pub const RINGS: usize = 4;
/// How much each ring follows the jaw and the lips (inner lip line … fixed anchor).
const FOLLOW: [f32; RINGS] = [1.0, 1.0, 0.55, 0.0];

/// The mesh: `RINGS × SEGMENTS` vertices at rest, and its triangles (indices into the vertices).
#[derive(Debug, Clone)]
pub struct FaceMesh {
    pub rest: Vec<Point>,
    pub triangles: Vec<[u16; 3]>,
}

impl FaceRig {
    /// The same rig for the portrait scaled by `factor`.
    pub fn scaled(&self, factor: f32) -> FaceRig {
        let point = |(x, y): Point| (x * factor, y * factor);
        FaceRig {
            mouth_center: point(self.mouth_center),
            mouth_half_width: self.mouth_half_width * factor,
            lip_height: self.lip_height * factor,
            chin: point(self.chin),
            jaw_half_width: self.jaw_half_width * factor,
            nose_tip: point(self.nose_tip),
            eyes: self.eyes.map(|eye| EyeRig {
                center: point(eye.center),
                half_width: eye.half_width * factor,
                half_height: eye.half_height * factor,
                ..eye
            }),
            ..self.clone()
        }
    }

    /// The rest mesh of this rig.
    pub fn mesh(&self) -> FaceMesh {
        let (cx, cy) = self.mouth_center;
        let below = (self.chin.1 - cy) * 1.12; // the anchor ring passes just under the chin
        let above = (cy - self.nose_tip.1) * 0.85;
        // (horizontal radius, radius above, radius below) of each ring.
        let radii = [
            (self.mouth_half_width * 0.96, 0.6, 0.6),
            (self.mouth_half_width * 1.12, self.lip_height * 1.15, self.lip_height * 1.25),
            (self.mouth_half_width * 1.7, above * 0.6, (self.chin.1 - cy) * 0.75),
            (self.jaw_half_width, above, below),
        ];
        let mut rest = Vec::with_capacity(RINGS * SEGMENTS);
        for (rx, up, down) in radii {
            for segment in 0..SEGMENTS {
                let angle = segment as f32 / SEGMENTS as f32 * std::f32::consts::TAU;
                let (sin, cos) = angle.sin_cos();
                let ry = if sin >= 0.0 { down } else { up };
                rest.push((cx + rx * cos, cy + ry * sin));
            }
        }
        let mut triangles = Vec::with_capacity((RINGS - 1) * SEGMENTS * 2);
        for ring in 0..RINGS - 1 {
            for segment in 0..SEGMENTS {
                let next = (segment + 1) % SEGMENTS;
                let (a, b) = (ring * SEGMENTS + segment, ring * SEGMENTS + next);
                let (c, d) = ((ring + 1) * SEGMENTS + segment, (ring + 1) * SEGMENTS + next);
                triangles.push([a as u16, b as u16, c as u16]);
                triangles.push([b as u16, d as u16, c as u16]);
            }
        }
        FaceMesh { rest, triangles }
    }

    /// The mesh's vertices for a mouth `open` (0…1) with lips `spread` (−1 rounded … 1 spread), into
    /// `out` (no allocation).
    pub fn deform(&self, mesh: &FaceMesh, open: f32, spread: f32, out: &mut [Point]) {
        let (cx, cy) = self.mouth_center;
        let jaw = open * (self.chin.1 - cy) * 0.32; // how far the lower lip and chin drop
        let lift = open * self.lip_height * 0.45; // the upper lip rises a little
        // Spread widens the mouth, rounding narrows it; an open jaw draws the corners in slightly.
        let width = 1.0 + 0.14 * spread - 0.08 * open;
        for (index, (&(x, y), out)) in mesh.rest.iter().zip(out.iter_mut()).enumerate() {
            let ring = index / SEGMENTS;
            let follow = FOLLOW[ring];
            let angle = (index % SEGMENTS) as f32 / SEGMENTS as f32 * std::f32::consts::TAU;
            let sin = angle.sin();
            // Below the lip line the jaw pulls down (most at the middle); above it the lip lifts.
            let pull = follow * sin.abs().powf(0.6);
            let dy = if sin > 0.0 { jaw * pull } else { -lift * pull };
            let dx = (x - cx) * (width - 1.0) * follow;
            *out = (x + dx, y + dy);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rig() -> FaceRig {
        let eye = EyeRig {
            center: (200.0, 230.0),
            half_width: 24.0,
            half_height: 12.0,
            lid: [200, 150, 120],
            lash: [40, 30, 30],
        };
        FaceRig {
            mouth_center: (256.0, 340.0),
            mouth_half_width: 40.0,
            lip_height: 9.0,
            chin: (256.0, 400.0),
            jaw_half_width: 110.0,
            nose_tip: (256.0, 290.0),
            eyes: [eye, EyeRig { center: (312.0, 230.0), ..eye }],
            mouth_interior: [60, 20, 25],
            teeth: [240, 240, 235],
        }
    }

    #[test]
    fn the_anchor_ring_never_moves_and_the_mouth_opens_downwards() {
        let rig = rig();
        let mesh = rig.mesh();
        assert_eq!(mesh.rest.len(), RINGS * SEGMENTS);
        assert_eq!(mesh.triangles.len(), (RINGS - 1) * SEGMENTS * 2);
        let mut out = vec![(0.0, 0.0); mesh.rest.len()];
        rig.deform(&mesh, 1.0, 0.5, &mut out);
        let anchor = (RINGS - 1) * SEGMENTS;
        assert_eq!(&out[anchor..], &mesh.rest[anchor..]);
        let lower_lip = SEGMENTS / 4; // straight down from the mouth centre, inner ring
        let upper_lip = 3 * SEGMENTS / 4;
        assert!(out[lower_lip].1 > mesh.rest[lower_lip].1 + 15.0, "the jaw drops");
        assert!(out[upper_lip].1 < mesh.rest[upper_lip].1, "the upper lip lifts");
        rig.deform(&mesh, 0.0, 0.0, &mut out);
        assert_eq!(out, mesh.rest, "closed and neutral is the rest pose");
    }
}
