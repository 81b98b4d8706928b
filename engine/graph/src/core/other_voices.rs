//! Other people's voices: once the user has been heard, speech well below the user's own level is the
//! room — the next table, a colleague across the office, a television — not the user: it neither opens a
//! user turn nor keeps one open, so it does not reach the transcript either.
//!
//! Levels are compared as each VAD window's *recent peak*: the loudest of the last `PEAK_WINDOWS` windows
//! (320 ms), a voice's loud syllables whatever its pauses. The user's level is the median recent peak of
//! the speech windows of their committed turns (the last `USER_WINDOWS`, ~32 s of speech). A window whose
//! recent peak is more than `MARGIN_DB` below it is another voice's (`VadGate::handle_window_of`).
//! Measured on espeak-ng voices (`docs/engine.md`, Noise and other voices): three voices talking at once
//! 10 dB (RMS) below the user have recent peaks at least 8.1 dB below the user's median; 95% of the user's
//! own speech windows are within 4.4 dB of it (most of the rest are an utterance's first windows, whose
//! onset the gate still reaches back over). What a level cannot tell apart: another voice as loud as the
//! user (a second person at the same microphone), or the user speaking more than `MARGIN_DB` softer than
//! before (leaning far back) — both are taken for what their level says.

use std::collections::VecDeque;

/// Whose voice one VAD window is, by its level.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Voice {
    /// The user's: a loud syllable of theirs (or anything, before the user has been heard).
    User,
    /// Near the user's level but not loud: the user's softer speech, or the room just after a loud
    /// syllable of its own.
    Unsure,
    /// Another voice's: its recent peak is well below the user's level.
    Other,
}

/// Whose voices a call hears (`stt.other_voices`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum OtherVoices {
    /// Once the user has been heard, voices well below their level are not the user's (off by default:
    /// in quiet live calls it cut the soft last words of some questions, `docs/engine.md`).
    Ignore,
    /// Every voice heard is the user's (the default; an external meeting, whose participants all are, is
    /// always heard so).
    #[default]
    Hear,
}

impl OtherVoices {
    /// The names the API accepts, in `stt.other_voices`.
    pub const NAMES: [&str; 2] = ["ignore", "hear"];

    pub fn parse(name: &str) -> Option<OtherVoices> {
        match name {
            "ignore" => Some(OtherVoices::Ignore),
            "hear" => Some(OtherVoices::Hear),
            _ => None,
        }
    }
}

/// Windows in a recent peak: 320 ms of 32 ms windows.
pub const PEAK_WINDOWS: usize = 10;
/// A recent peak more than this far below the user's level is another voice.
pub const MARGIN_DB: f32 = 7.0;
/// A window itself this close to the user's level is a loud syllable of the user's: the room's voices,
/// 10 dB below, do not reach it (their recent peaks stay 8 dB and more below).
pub const LOUD_DB: f32 = 6.0;
/// The user's level is the median of their last this many speech windows' recent peaks (~32 s of speech).
pub const USER_WINDOWS: usize = 1_000;

/// A window's level in dBFS from its mean square (−100 for digital silence).
pub fn level_db(mean_square: f32) -> f32 {
    10.0 * (mean_square.max(1e-10)).log10()
}

/// One call's levels: the recent peak and the user's level.
#[derive(Debug, Clone)]
pub struct VoiceLevels {
    /// The last `PEAK_WINDOWS` windows' levels (dBFS), a ring.
    recent: [f32; PEAK_WINDOWS],
    next: usize,
    /// Recent peaks of the speech windows of the turn being heard.
    turn: Vec<f32>,
    /// Recent peaks of the speech windows of the user's committed turns, newest last.
    user: VecDeque<f32>,
    /// Their median, once the user has been heard.
    user_level: Option<f32>,
}

impl Default for VoiceLevels {
    fn default() -> Self {
        VoiceLevels {
            recent: [-100.0; PEAK_WINDOWS],
            next: 0,
            turn: Vec::new(),
            user: VecDeque::new(),
            user_level: None,
        }
    }
}

impl VoiceLevels {
    /// Takes one window's level (dBFS); whose voice it is. `speech` says whether the window is speech of
    /// the turn being heard (its recent peak then counts towards the user's level if the turn is
    /// committed).
    pub fn voice_of(&mut self, level: f32, speech: bool) -> Voice {
        self.recent[self.next] = level;
        self.next = (self.next + 1) % PEAK_WINDOWS;
        let peak = self.recent.iter().copied().fold(f32::MIN, f32::max);
        let Some(user) = self.user_level else {
            if speech {
                self.turn.push(peak);
            }
            return Voice::User;
        };
        if peak < user - MARGIN_DB {
            return Voice::Other;
        }
        if speech {
            self.turn.push(peak);
        }
        if level >= user - LOUD_DB { Voice::User } else { Voice::Unsure }
    }

    /// The user's level (dBFS of their recent peaks), once a turn of theirs has been committed.
    pub fn user_level(&self) -> Option<f32> {
        self.user_level
    }

    /// The turn being heard was committed: its speech is the user's.
    pub fn turn_committed(&mut self) {
        for peak in self.turn.drain(..) {
            if self.user.len() == USER_WINDOWS {
                self.user.pop_front();
            }
            self.user.push_back(peak);
        }
        if !self.user.is_empty() {
            let mut sorted: Vec<f32> = self.user.iter().copied().collect();
            sorted.sort_by(f32::total_cmp);
            self.user_level = Some(sorted[sorted.len() / 2]);
        }
    }

    /// Speech that made no turn (a backchannel, speech the agent talked through): not counted.
    pub fn speech_dropped(&mut self) {
        self.turn.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `n` speech windows at `level`; which were taken for another voice.
    fn feed(levels: &mut VoiceLevels, n: usize, level: f32) -> Vec<bool> {
        (0..n).map(|_| levels.voice_of(level, true) == Voice::Other).collect()
    }

    #[test]
    fn nothing_is_another_voice_before_the_user_has_been_heard() {
        let mut levels = VoiceLevels::default();
        assert!(feed(&mut levels, 100, -45.0).iter().all(|&other| !other));
        assert_eq!(levels.user_level(), None);
    }

    #[test]
    fn voices_well_below_the_user_are_not_the_user() {
        let mut levels = VoiceLevels::default();
        feed(&mut levels, 50, -20.0);
        levels.turn_committed();
        assert_eq!(levels.user_level(), Some(-20.0));
        // The next table, 10 dB below: another voice once the user's last peak is 320 ms behind.
        let seen = feed(&mut levels, 30, -30.0);
        assert_eq!(seen.iter().position(|&other| other), Some(PEAK_WINDOWS - 1), "{seen:?}");
        assert!(seen[PEAK_WINDOWS - 1..].iter().all(|&other| other));
        // The user over them: heard at once.
        assert_eq!(levels.voice_of(-20.0, true), Voice::User);
        // Less than the margin below the user: still the user.
        assert!(feed(&mut levels, 30, -20.0 - MARGIN_DB + 0.5).iter().all(|&other| !other));
    }

    #[test]
    fn only_windows_near_the_users_level_are_loud_syllables_of_theirs() {
        let mut levels = VoiceLevels::default();
        feed(&mut levels, 50, -20.0);
        levels.turn_committed();
        assert_eq!(levels.voice_of(-20.0 - LOUD_DB + 0.5, true), Voice::User);
        // Softer windows within the recent peak of a loud one: the user's softer speech or the room.
        assert_eq!(levels.voice_of(-30.0, true), Voice::Unsure);
        assert_eq!(levels.voice_of(-20.0 - LOUD_DB - 0.5, true), Voice::Unsure);
    }

    #[test]
    fn the_users_level_follows_their_committed_turns() {
        let mut levels = VoiceLevels::default();
        feed(&mut levels, 50, -20.0);
        levels.turn_committed();
        // Windows of other voices do not count towards it; the user's next, softer turn does.
        feed(&mut levels, 20, -40.0);
        feed(&mut levels, 150, -24.0);
        levels.turn_committed();
        assert_eq!(levels.user_level(), Some(-24.0));
    }

    #[test]
    fn speech_that_made_no_turn_does_not_set_the_level() {
        let mut levels = VoiceLevels::default();
        feed(&mut levels, 50, -20.0);
        levels.speech_dropped();
        levels.turn_committed();
        assert_eq!(levels.user_level(), None);
    }
}
