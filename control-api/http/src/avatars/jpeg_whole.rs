//! Whether a JPEG file holds its whole picture: JPEG decoders fill a file that ends early with grey and
//! report no error, so a truncated upload would reach face detection and fail as "no face". This walks
//! the file's segments (skipping each by its length, so an EXIF thumbnail's own end marker is never taken
//! for the picture's) and the entropy-coded data after each start-of-scan, and answers true only when the
//! end-of-image marker comes before the bytes run out. Bytes after it (trailers some cameras append) are
//! allowed.

/// True when `bytes` (a JPEG, starting with its start-of-image marker) reaches its end-of-image marker.
pub fn jpeg_is_whole(bytes: &[u8]) -> bool {
    if !bytes.starts_with(&[0xFF, 0xD8]) {
        return false;
    }
    let mut at = 2;
    loop {
        // A marker: 0xFF (any number of fill bytes), then its code.
        if bytes.get(at) != Some(&0xFF) {
            return false;
        }
        while bytes.get(at + 1) == Some(&0xFF) {
            at += 1;
        }
        let Some(&code) = bytes.get(at + 1) else { return false };
        match code {
            0xD9 => return true,
            0x01 | 0xD0..=0xD7 => at += 2,
            _ => {
                let Some(length) = bytes.get(at + 2..at + 4).map(|b| usize::from(u16::from_be_bytes([b[0], b[1]])))
                else {
                    return false;
                };
                at += 2 + length;
                if code == 0xDA {
                    // Entropy-coded data runs to the next marker that is neither a stuffed 0xFF00 nor a
                    // restart marker.
                    loop {
                        match (bytes.get(at), bytes.get(at + 1)) {
                            (Some(0xFF), Some(next)) if *next != 0x00 && !(0xD0..=0xD7).contains(next) => break,
                            (Some(_), Some(_)) => at += 1,
                            _ => return false,
                        }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tiny baseline JPEG: SOI, an APP1 holding a thumbnail with its own SOI/EOI, DQT-like segment,
    /// SOS, entropy data with a stuffed byte and a restart marker, EOI.
    fn jpeg() -> Vec<u8> {
        let mut bytes = vec![0xFF, 0xD8];
        bytes.extend([0xFF, 0xE1, 0x00, 0x08, 0xFF, 0xD8, 0x01, 0x02, 0xFF, 0xD9]);
        bytes.extend([0xFF, 0xDB, 0x00, 0x04, 0x00, 0x01]);
        bytes.extend([0xFF, 0xDA, 0x00, 0x03, 0x01]);
        bytes.extend([0x12, 0xFF, 0x00, 0x34, 0xFF, 0xD0, 0x56, 0x78]);
        bytes.extend([0xFF, 0xD9]);
        bytes
    }

    #[test]
    fn a_whole_file_is_whole_and_a_cut_one_is_not() {
        let whole = jpeg();
        assert!(jpeg_is_whole(&whole));
        let mut trailer = whole.clone();
        trailer.extend(b"appended by a camera");
        assert!(jpeg_is_whole(&trailer));
        for cut in 2..whole.len() - 1 {
            assert!(!jpeg_is_whole(&whole[..cut]), "cut at {cut} of {}", whole.len());
        }
        assert!(!jpeg_is_whole(b"not a jpeg"));
    }
}
