//! Avatars: the built-in stock set and the custom avatars generated from a user's image.

pub mod assets;
pub mod custom;
pub mod portrait;
pub mod stock_catalog;
