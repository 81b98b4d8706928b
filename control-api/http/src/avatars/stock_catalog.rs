//! The stock avatars: a fixed set of illustrated faces (drawn by the engine, never a real person's
//! likeness), their display pictures rendered once, on first use.

use std::sync::OnceLock;

use axum::Json;
use serde::Serialize;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::AppState;
use confab_store::avatars::portrait::png_data_uri;

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct StockAvatar {
    pub avatar_key_id: String,
    pub avatar_name: String,
    pub gender: String,
    /// PNG as a base64 data URI.
    pub display_picture: String,
}

/// (avatar_key_id, name, gender); each face is drawn by the engine (`confab_engine::avatar::stock`).
const CATALOGUE: [(&str, &str, &str); 5] = [
    ("stock-amara", "Amara", "female"),
    ("stock-kenji", "Kenji", "male"),
    ("stock-sofia", "Sofia", "female"),
    ("stock-malik", "Malik", "male"),
    ("stock-ingrid", "Ingrid", "female"),
];

/// The stock avatars, rendered on first use.
pub fn stock_avatars() -> &'static [StockAvatar] {
    static AVATARS: OnceLock<Vec<StockAvatar>> = OnceLock::new();
    AVATARS.get_or_init(|| {
        CATALOGUE
            .iter()
            .map(|(key, name, gender)| StockAvatar {
                avatar_key_id: key.to_string(),
                avatar_name: name.to_string(),
                gender: gender.to_string(),
                display_picture: png_data_uri(key).expect("the engine draws every stock face"),
            })
            .collect()
    })
}

pub fn find_stock_avatar(avatar_key_id: &str) -> Option<&'static StockAvatar> {
    stock_avatars().iter().find(|avatar| avatar.avatar_key_id == avatar_key_id)
}

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(list_stock_avatars))
}

/// The built-in stock avatars.
#[utoipa::path(get, path = "/v1/ext/avatars", tag = "avatars", responses((status = 200, body = [StockAvatar]), (status = 401)))]
async fn list_stock_avatars() -> Json<&'static [StockAvatar]> {
    Json(stock_avatars())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stock_avatars_are_distinct_pngs() {
        let avatars = stock_avatars();
        assert!(avatars.len() >= 4);
        for (i, a) in avatars.iter().enumerate() {
            assert!(a.display_picture.starts_with("data:image/png;base64,iVBORw0KGgo"));
            for b in &avatars[i + 1..] {
                assert_ne!(a.display_picture, b.display_picture);
                assert_ne!(a.avatar_key_id, b.avatar_key_id);
            }
        }
    }
}
