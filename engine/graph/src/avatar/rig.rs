//! A face rig: the landmarks a portrait's face is animated by (mouth, lips, jaw, eyes) and the triangle
//! mesh over the lower face that the renderer warps. The mesh is a set of rings around the mouth: the
//! inner lip line (which opens), the outer lip edge, the cheeks and jaw, and a fixed anchor ring. A photo's
//! rings follow its own lip contours and jaw line (`lips`); a drawing's are ellipses. Each ring follows
//! the upper lip above the lip line and the jaw below it by its own share, per column across the mouth.
//! The anchor never moves, so everything outside it is the untouched portrait: no seams.

use super::lips::LipContours;

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
    /// How much skin above the eye (in eye half-heights, from its lash line up) is the upper lid that
    /// slides down over it in a blink: less where a brow sits close above the eye.
    #[serde(default = "EyeRig::default_lid_skin")]
    pub lid_skin: f32,
}

impl EyeRig {
    /// A photo's upper lid: 1.3 eye half-heights of skin above the eye.
    pub const LID_SKIN: f32 = 1.3;

    fn default_lid_skin() -> f32 {
        EyeRig::LID_SKIN
    }
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
    /// A photo's own lip contours and jaw line (none for drawings: their mesh is elliptical).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lips: Option<LipContours>,
}

/// Angular steps around each ring.
pub const SEGMENTS: usize = 24;
/// Columns of the mouth, corner to corner: vertex `s` of a ring and vertex `SEGMENTS − s` share one (the
/// upper and the lower lip at the same place across the mouth).
pub const COLUMNS: usize = SEGMENTS / 2 + 1;
/// How much each ring of a drawn face's mesh follows the jaw and the lips (inner lip line … fixed anchor).
const DRAWN_FOLLOW: [RingFollow; 4] = [
    RingFollow { up: 1.0, down: 1.0, spread: 1.0 },
    RingFollow { up: 1.0, down: 1.0, spread: 1.0 },
    RingFollow { up: 0.55, down: 0.55, spread: 0.55 },
    RingFollow { up: 0.0, down: 0.0, spread: 0.0 },
];

/// How much one ring of the mesh moves with the mouth: above the lip line with the upper lip, below it
/// with the jaw, and sideways with the lips' spread (1 fully, 0 not at all).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RingFollow {
    pub up: f32,
    pub down: f32,
    pub spread: f32,
}

/// The mesh: rings of `SEGMENTS` vertices at rest, from the inner lip line out to a fixed anchor ring,
/// its triangles (indices into the vertices), and how each ring follows the mouth.
#[derive(Debug, Clone)]
pub struct FaceMesh {
    pub rest: Vec<Point>,
    pub triangles: Vec<[u16; 3]>,
    pub follow: Vec<RingFollow>,
    /// The photo's own lips (a photo's mesh follows their contours; a drawing's is elliptical).
    pub photo: bool,
}

impl FaceMesh {
    fn from_rings(rest: Vec<Point>, follow: Vec<RingFollow>, photo: bool) -> FaceMesh {
        let rings = follow.len();
        debug_assert_eq!(rest.len(), rings * SEGMENTS);
        let mut triangles = Vec::with_capacity((rings - 1) * SEGMENTS * 2);
        for ring in 0..rings - 1 {
            for segment in 0..SEGMENTS {
                let next = (segment + 1) % SEGMENTS;
                let (a, b) = (ring * SEGMENTS + segment, ring * SEGMENTS + next);
                let (c, d) = ((ring + 1) * SEGMENTS + segment, (ring + 1) * SEGMENTS + next);
                triangles.push([a as u16, b as u16, c as u16]);
                triangles.push([b as u16, d as u16, c as u16]);
            }
        }
        FaceMesh { rest, triangles, follow, photo }
    }

    /// The inner lip line (the first ring): where the mouth opens.
    pub fn inner_lips(&self) -> &[Point] {
        &self.rest[..SEGMENTS]
    }

    /// The anchor ring (the last): it never moves, so nothing outside it is touched.
    pub fn anchor(&self) -> &[Point] {
        &self.rest[self.rest.len() - SEGMENTS..]
    }

    /// The gap between the inner lips at rest in each column (0 where the photo's lips meet).
    pub fn rest_gap(&self, column: usize) -> f32 {
        let (upper, lower) = column_vertices(column);
        (self.rest[lower].1 - self.rest[upper].1).max(0.0)
    }
}

/// The (upper, lower) vertex indices of `column` on the first ring (the corners are both).
pub fn column_vertices(column: usize) -> (usize, usize) {
    (if column == 0 { 0 } else { SEGMENTS - column }, column)
}

/// The column of vertex `segment` of a ring.
fn column_of(segment: usize) -> usize {
    if segment <= SEGMENTS / 2 { segment } else { SEGMENTS - segment }
}

/// How much of an opening a column carries: all of it at the middle of the mouth, none at the corners.
fn opening_profile(column: usize) -> f32 {
    let angle = column as f32 / SEGMENTS as f32 * std::f32::consts::TAU;
    angle.sin().abs().powf(0.6)
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
            lips: self.lips.as_ref().map(|lips| lips.scaled(factor)),
            ..self.clone()
        }
    }

    /// The rest mesh of this rig: along the photo's own lip contours and jaw line where it has them,
    /// elliptical rings around the mouth otherwise.
    pub fn mesh(&self) -> FaceMesh {
        if let Some(lips) = &self.lips {
            return FaceMesh::from_rings(lips.rings(self), super::lips::PHOTO_FOLLOW.to_vec(), true);
        }
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
        let mut rest = Vec::with_capacity(radii.len() * SEGMENTS);
        for (rx, up, down) in radii {
            for segment in 0..SEGMENTS {
                let angle = segment as f32 / SEGMENTS as f32 * std::f32::consts::TAU;
                let (sin, cos) = angle.sin_cos();
                let ry = if sin >= 0.0 { down } else { up };
                rest.push((cx + rx * cos, cy + ry * sin));
            }
        }
        FaceMesh::from_rings(rest, DRAWN_FOLLOW.to_vec(), false)
    }

    /// How far the upper lip (`up`, upwards) and the lower lip (`down`, downwards; negative closes) move
    /// in `column` for a mouth `open` (0…1). A drawing opens from closed lips; a photo's opening is the gap
    /// between its inner lips, `open` × `GAP_OF_CHIN` of the mouth-to-chin distance (or `WIDER_THAN_SMILE`
    /// × the photo's own gap, for a photo that shows its teeth wide), reached from the photo's own gap: wider carried mostly by the jaw, narrower (a photo that shows its teeth, closing
    /// for a consonant) by both lips meeting.
    pub fn column_moves(&self, mesh: &FaceMesh, open: f32, column: usize) -> (f32, f32) {
        let profile = opening_profile(column);
        let chin = self.chin.1 - self.mouth_center.1;
        if !mesh.photo {
            return (open * self.lip_height * 0.45 * profile, open * chin * 0.32 * profile);
        }
        let rest_gap = mesh.rest_gap(SEGMENTS / 4);
        let widest = (super::lips::GAP_OF_CHIN * chin).max(rest_gap * super::lips::WIDER_THAN_SMILE);
        let target = open * widest;
        if target >= rest_gap {
            let wider = (target - rest_gap) * profile;
            (wider * (1.0 - super::lips::JAW_SHARE), wider * super::lips::JAW_SHARE)
        } else {
            let narrower = mesh.rest_gap(column) * (1.0 - target / rest_gap.max(1e-3));
            (-narrower * 0.4, -narrower * 0.6)
        }
    }

    /// The mesh's vertices for a mouth `open` (0…1) with lips `spread` (−1 rounded … 1 spread), into
    /// `out` (no allocation). Returns each column's (upper lip up, lower lip down).
    pub fn deform(&self, mesh: &FaceMesh, open: f32, spread: f32, out: &mut [Point]) -> [(f32, f32); COLUMNS] {
        let cx = self.mouth_center.0;
        // Spread widens the mouth, rounding narrows it; an open jaw draws the corners in slightly.
        let width = 1.0 + 0.14 * spread - 0.08 * open;
        let mut moves = [(0.0f32, 0.0f32); COLUMNS];
        for (column, moved) in moves.iter_mut().enumerate() {
            *moved = self.column_moves(mesh, open, column);
        }
        for (index, (&(x, y), out)) in mesh.rest.iter().zip(out.iter_mut()).enumerate() {
            let follow = mesh.follow[index / SEGMENTS];
            let segment = index % SEGMENTS;
            let (up, down) = moves[column_of(segment)];
            // Below the lip line the jaw pulls down; above it the lip lifts.
            let dy = if segment > 0 && segment < SEGMENTS / 2 {
                down * follow.down
            } else if segment > SEGMENTS / 2 {
                -up * follow.up
            } else {
                0.0
            };
            let dx = (x - cx) * (width - 1.0) * follow.spread;
            *out = (x + dx, y + dy);
        }
        moves
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
            lid_skin: EyeRig::LID_SKIN,
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
            lips: None,
        }
    }

    #[test]
    fn the_anchor_ring_never_moves_and_the_mouth_opens_downwards() {
        let rig = rig();
        let mesh = rig.mesh();
        assert_eq!(mesh.rest.len(), 4 * SEGMENTS);
        assert_eq!(mesh.triangles.len(), 3 * SEGMENTS * 2);
        let mut out = vec![(0.0, 0.0); mesh.rest.len()];
        rig.deform(&mesh, 1.0, 0.5, &mut out);
        let anchor = 3 * SEGMENTS;
        assert_eq!(&out[anchor..], &mesh.rest[anchor..]);
        let lower_lip = SEGMENTS / 4; // straight down from the mouth centre, inner ring
        let upper_lip = 3 * SEGMENTS / 4;
        assert!(out[lower_lip].1 > mesh.rest[lower_lip].1 + 15.0, "the jaw drops");
        assert!(out[upper_lip].1 < mesh.rest[upper_lip].1, "the upper lip lifts");
        rig.deform(&mesh, 0.0, 0.0, &mut out);
        assert_eq!(out, mesh.rest, "closed and neutral is the rest pose");
    }
}
