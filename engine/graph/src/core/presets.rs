//! The agent's turn-taking settings as numbers: explicit `min_endpointing_delay`/`max_endpointing_delay`
//! win; otherwise the `turn_handling` preset; otherwise 0.5 s / 3.0 s. `interruptability` sets how much
//! overlapping speech interrupts the agent; `backchannels` (`ignore`, the default, or `interrupt`) whether
//! speech over the agent made only of backchannels ("mm-hmm", "yeah") interrupts it at all.
//!
//! | turn_handling | min delay | max delay |      | interruptability | min overlap | words required |
//! |---|---|---|---|---|---|---|
//! | proactive  | 0.3 s | 1.5 s | | high   | 0.25 s | no  |
//! | balanced   | 0.5 s | 3.0 s | | medium | 0.5 s  | no  |
//! | deliberate | 0.8 s | 5.0 s | | low    | 1.0 s  | yes (when the STT streams words) |

use super::endpoint::EndpointConfig;
use super::interruption::InterruptionConfig;
use crate::time::MediaTime;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TurnHandling {
    Proactive,
    Balanced,
    Deliberate,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Interruptability {
    Low,
    Medium,
    High,
}

impl TurnHandling {
    pub fn parse(name: &str) -> Option<TurnHandling> {
        match name {
            "proactive" => Some(TurnHandling::Proactive),
            "balanced" => Some(TurnHandling::Balanced),
            "deliberate" => Some(TurnHandling::Deliberate),
            _ => None,
        }
    }

    fn delays_ms(self) -> (u64, u64) {
        match self {
            TurnHandling::Proactive => (300, 1500),
            TurnHandling::Balanced => (500, 3000),
            TurnHandling::Deliberate => (800, 5000),
        }
    }
}

impl Interruptability {
    pub fn parse(name: &str) -> Option<Interruptability> {
        match name {
            "low" => Some(Interruptability::Low),
            "medium" => Some(Interruptability::Medium),
            "high" => Some(Interruptability::High),
            _ => None,
        }
    }

    pub fn config(self, streaming_words: bool) -> InterruptionConfig {
        match self {
            Interruptability::High => {
                InterruptionConfig { min_duration: MediaTime::from_millis(250), ..InterruptionConfig::default() }
            }
            Interruptability::Medium => {
                InterruptionConfig { min_duration: MediaTime::from_millis(500), ..InterruptionConfig::default() }
            }
            Interruptability::Low => InterruptionConfig {
                min_duration: MediaTime::from_millis(1000),
                require_words: streaming_words,
                ..InterruptionConfig::default()
            },
        }
    }
}

/// Endpointing delays from the agent's settings (seconds); a max below the min is raised to the min.
pub fn endpoint_config(
    min_seconds: Option<f64>,
    max_seconds: Option<f64>,
    preset: Option<TurnHandling>,
) -> EndpointConfig {
    let (preset_min, preset_max) = preset.unwrap_or(TurnHandling::Balanced).delays_ms();
    let min_delay = min_seconds.map(MediaTime::from_secs_f64).unwrap_or(MediaTime::from_millis(preset_min));
    let max_delay = max_seconds.map(MediaTime::from_secs_f64).unwrap_or(MediaTime::from_millis(preset_max));
    EndpointConfig { min_delay, max_delay: max_delay.max(min_delay) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn explicit_delays_win_over_presets_and_defaults_apply() {
        assert_eq!(endpoint_config(None, None, None), EndpointConfig::default());
        let proactive = endpoint_config(None, None, Some(TurnHandling::Proactive));
        assert_eq!(
            (proactive.min_delay, proactive.max_delay),
            (MediaTime::from_millis(300), MediaTime::from_millis(1500))
        );
        let mixed = endpoint_config(Some(0.2), None, Some(TurnHandling::Deliberate));
        assert_eq!((mixed.min_delay, mixed.max_delay), (MediaTime::from_millis(200), MediaTime::from_millis(5000)));
        let inverted = endpoint_config(Some(2.0), Some(1.0), None);
        assert_eq!(inverted.max_delay, MediaTime::from_millis(2000));
    }

    #[test]
    fn interruptability_maps_to_documented_numbers() {
        assert_eq!(
            Interruptability::parse("low").unwrap().config(true),
            InterruptionConfig {
                min_duration: MediaTime::from_millis(1000),
                require_words: true,
                ..Default::default()
            }
        );
        assert_eq!(Interruptability::parse("high").unwrap().config(true).min_duration, MediaTime::from_millis(250));
        assert!(Interruptability::parse("extreme").is_none());
    }
}
