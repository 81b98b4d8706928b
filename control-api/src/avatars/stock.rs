//! The stock avatars: a fixed set with procedurally drawn display pictures, rendered once at start.

use std::sync::OnceLock;

use axum::Json;
use serde::Serialize;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::portrait::{HairStyle, PortraitStyle, png_data_uri};
use crate::AppState;

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct StockAvatar {
    pub avatar_key_id: String,
    pub avatar_name: String,
    pub gender: String,
    /// PNG as a base64 data URI.
    pub display_picture: String,
}

const CATALOGUE: [(&str, &str, &str, PortraitStyle); 5] = [
    (
        "stock-amara",
        "Amara",
        "female",
        PortraitStyle {
            background: [96, 146, 204],
            skin: [141, 85, 54],
            hair: [28, 22, 20],
            shirt: [222, 120, 60],
            hair_style: HairStyle::Curly,
            glasses: false,
        },
    ),
    (
        "stock-kenji",
        "Kenji",
        "male",
        PortraitStyle {
            background: [120, 190, 150],
            skin: [236, 196, 160],
            hair: [20, 20, 24],
            shirt: [52, 70, 120],
            hair_style: HairStyle::Short,
            glasses: true,
        },
    ),
    (
        "stock-sofia",
        "Sofia",
        "female",
        PortraitStyle {
            background: [230, 180, 120],
            skin: [224, 172, 135],
            hair: [110, 62, 30],
            shirt: [70, 130, 110],
            hair_style: HairStyle::Long,
            glasses: false,
        },
    ),
    (
        "stock-malik",
        "Malik",
        "male",
        PortraitStyle {
            background: [170, 140, 200],
            skin: [92, 58, 40],
            hair: [16, 14, 14],
            shirt: [200, 200, 205],
            hair_style: HairStyle::Short,
            glasses: false,
        },
    ),
    (
        "stock-ingrid",
        "Ingrid",
        "female",
        PortraitStyle {
            background: [200, 110, 120],
            skin: [246, 214, 190],
            hair: [226, 196, 120],
            shirt: [40, 40, 60],
            hair_style: HairStyle::Bun,
            glasses: true,
        },
    ),
];

/// The stock avatars, rendered on first use.
pub fn stock_avatars() -> &'static [StockAvatar] {
    static AVATARS: OnceLock<Vec<StockAvatar>> = OnceLock::new();
    AVATARS.get_or_init(|| {
        CATALOGUE
            .iter()
            .map(|(key, name, gender, style)| StockAvatar {
                avatar_key_id: key.to_string(),
                avatar_name: name.to_string(),
                gender: gender.to_string(),
                display_picture: png_data_uri(style),
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
