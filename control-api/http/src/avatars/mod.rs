//! The avatar routes: the built-in stock set and the custom avatars generated from a user's image (their
//! pictures and rigs are kept by `confab_store::avatars`).

pub mod custom;
pub mod jpeg_whole;
pub mod stock_catalog;
