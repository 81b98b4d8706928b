//! A custom avatar's source picture: the header check the API does (`describe_image`) and, when it
//! passes, the decoder the face pipeline uses (`decode_picture`, with its size limits). Neither may panic,
//! and nothing larger than the limits may ever be decoded.
#![no_main]

use confab_http::avatars::custom::describe_image;
use confab_engine::avatar::from_image::{MAX_PICTURE_PIXELS, MAX_PICTURE_SIDE, decode_picture};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let described = describe_image(data);
    if let Ok(picture) = decode_picture(data) {
        let (width, height) = picture.dimensions();
        assert!(u64::from(width) * u64::from(height) <= MAX_PICTURE_PIXELS);
        assert!(width.max(height) <= MAX_PICTURE_SIDE);
        if let Ok(described) = described {
            assert_eq!(described["width"], width, "the header and the decoder agree on the size");
            assert_eq!(described["height"], height);
        }
    }
});
