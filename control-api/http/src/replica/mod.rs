//! What a fleet replica (`confab serve --nats`) runs beside the REST API: `dispatch` places calls on media
//! workers through NATS (`placer`: as the HTTP side's `CallPlacer`), `liveness` ends lost workers' calls
//! and wakes the webhook deliverer. A replica holds no call and no state another replica needs.

pub mod dispatch;
pub mod liveness;
pub mod placer;
