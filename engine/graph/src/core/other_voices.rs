//! Other people's voices: once the user has been heard, speech well below the user's own level is the
//! room — the next table, a colleague across the office, a television — not the user: it neither opens a
//! user turn nor keeps one open, so it does not reach the transcript either.
//!
//! Levels are compared as each VAD window's *recent peak*: the loudest of the last `PEAK_WINDOWS` windows
//! (320 ms), a voice's loud syllables whatever its pauses. The user's level is the median recent peak of
//! the speech windows of their committed turns (the last `USER_WINDOWS`, ~32 s of speech) that were near
//! it (`Voice::User` or `Voice::Unsure`: a soft window, below it by definition, would drag it down turn by
//! turn). A window whose recent peak is more than `MARGIN_DB` below it is another voice's
//! (`VadGate::handle_window_of`).
//! Measured on espeak-ng voices (`docs/engine.md`, Noise and other voices): three voices talking at once
//! 10 dB (RMS) below the user have recent peaks at least 8.1 dB below the user's median; 95% of the user's
//! own speech windows are within 4.4 dB of it (most of the rest are an utterance's first windows, whose
//! onset the gate still reaches back over). What a level cannot tell apart: another voice as loud as the
//! user (a second person at the same microphone), or the user speaking more than `MARGIN_DB` softer than
//! before (leaning far back) — both are taken for what their level says.
//!
//! **Voice checks** rescue the user's soft words: when voiceprints of the call's recent audio come in
//! (`VoiceLevels::voiceprint`, 1.6 s of audio every 640 ms of sound, by the voice encoder), the user's
//! voice is the mean voiceprint of the stretches heard during their committed turns, and a window the
//! level takes for another voice is the user's soft speech after all (`Voice::Soft`: it carries their
//! speech on, up to `VadGateConfig::soft_voice_limit` after their last loud window, but never starts it)
//! while the last check — at most `CHECK_VALID` old, and taken at least `AFTER_LOUD` after the user's last
//! loud window (a check taken while they spoke up hears them, not what follows) — sounded like them
//! (similarity ≥ `SAME_VOICE`). The room alone, or the room after the user's last loud syllable (a mixture
//! less alike), stays another voice. A check that hears the room alone (no turn of the user's open) sound
//! like the user — espeak-ng's voices all do, to the encoder — makes checks speak for nobody for
//! `ALIKE_ROOM_MEMORY`: they cannot tell this room from the user, so the level decides alone. Without
//! checks (no encoder, or none back yet) the level decides alone.

use std::collections::VecDeque;

use confab_models::voice_encoder::Voiceprint;

use crate::time::MediaTime;

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
    /// Well below the user's level, but the last voice check heard the user: their soft speech (it carries
    /// their speech on, for at most `VadGateConfig::soft_voice_limit` after their last loud window), or a
    /// room whose voices sound like the user's (so it never starts speech).
    Soft,
}

/// Whose voices a call hears (`stt.other_voices`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum OtherVoices {
    /// Once the user has been heard, voices well below their level are not the user's (the default).
    #[default]
    Ignore,
    /// Every voice heard is the user's (an external meeting, whose participants all are, is always heard
    /// so).
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
/// A stretch whose voiceprint is at least this similar to the user's (cosine) is the user's.
pub const SAME_VOICE: f32 = 0.75;
/// A check speaks for soft windows only when it heard at least this much after the user's last loud
/// window: one taken while they spoke up hears their voice, not what came after it (the room's talk).
pub const AFTER_LOUD: MediaTime = MediaTime::from_millis(320);
/// A voice check speaks for the windows up to this long after the audio it heard ended (checks come
/// every 640 ms of sound).
pub const CHECK_VALID: MediaTime = MediaTime::from_millis(800);
/// A check that heard the room alone sound like the user (espeak-ng's voices all do, to the encoder) makes
/// the checks of the next this long speak for nobody: the level decides alone.
pub const ALIKE_ROOM_MEMORY: MediaTime = MediaTime::from_millis(30_000);
/// The user's voice is the mean of the voiceprints of their last this many stretches (~16 s of speech).
pub const USER_PRINTS: usize = 50;

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
    /// Recent peaks of the speech windows of the turn being heard that are near the user's level (loud or
    /// unsure; before the user has been heard, all).
    turn: Vec<f32>,
    /// Recent peaks of the speech windows of the user's committed turns, newest last.
    user: VecDeque<f32>,
    /// Their median, once the user has been heard.
    user_level: Option<f32>,
    /// Voiceprints of the turn being heard (stretches that ended on a window of the user's).
    turn_prints: Vec<Voiceprint>,
    /// Voiceprints of the user's committed turns, newest last, and their mean.
    user_prints: VecDeque<Voiceprint>,
    user_voice: Option<Voiceprint>,
    /// The last voice check: the end of the audio it heard, and whether it sounded like the user.
    last_check: Option<(MediaTime, bool)>,
    /// When a check last heard the room alone (the user not speaking) sound like the user: the end of its
    /// audio. While that is recent (`ALIKE_ROOM_MEMORY`), checks cannot tell the two apart in this call.
    alike_room_at: Option<MediaTime>,
    /// The voice the last window was taken for.
    last_voice: Voice,
    /// The end of the last loud window of the user's (`Voice::User`) once their level is known.
    last_loud: Option<MediaTime>,
}

impl Default for VoiceLevels {
    fn default() -> Self {
        VoiceLevels {
            recent: [-100.0; PEAK_WINDOWS],
            next: 0,
            turn: Vec::new(),
            user: VecDeque::new(),
            user_level: None,
            turn_prints: Vec::new(),
            user_prints: VecDeque::new(),
            user_voice: None,
            last_check: None,
            alike_room_at: None,
            last_voice: Voice::User,
            last_loud: None,
        }
    }
}

impl VoiceLevels {
    /// Takes one window's level (dBFS) and its end; whose voice it is. `speech` says whether the window
    /// is speech of the turn being heard (its recent peak then counts towards the user's level if the turn
    /// is committed).
    pub fn voice_of(&mut self, level: f32, end: MediaTime, speech: bool) -> Voice {
        self.recent[self.next] = level;
        self.next = (self.next + 1) % PEAK_WINDOWS;
        let peak = self.recent.iter().copied().fold(f32::MIN, f32::max);
        let voice = match self.user_level {
            None => Voice::User,
            Some(user) if peak < user - MARGIN_DB => {
                if self.sounds_like_the_user(end) {
                    Voice::Soft
                } else {
                    Voice::Other
                }
            }
            Some(user) if level >= user - LOUD_DB => Voice::User,
            Some(_) => Voice::Unsure,
        };
        if speech && matches!(voice, Voice::User | Voice::Unsure) {
            self.turn.push(peak);
        }
        if voice == Voice::User && self.user_level.is_some() {
            self.last_loud = Some(end);
        }
        self.last_voice = voice;
        voice
    }

    /// The last voice check, if recent enough, heard the user — unless the room, heard alone not long
    /// ago, sounded like the user too (then a check cannot tell them apart).
    fn sounds_like_the_user(&self, at: MediaTime) -> bool {
        let alike_room = self.alike_room_at.is_some_and(|heard| at <= heard + ALIKE_ROOM_MEMORY);
        !alike_room && matches!(self.last_check, Some((heard_to, true)) if at <= heard_to + CHECK_VALID)
    }

    /// A voiceprint of the call's audio up to `end` (`voice_encoder`): a voice check. `speaking` says
    /// whether the user's turn is being heard; its stretches that end on a loud window of the user's make
    /// the user's voice once the turn is committed.
    pub fn voiceprint(&mut self, end: MediaTime, print: Voiceprint, speaking: bool) {
        let after_loud = self.last_loud.is_none_or(|loud| end >= loud + AFTER_LOUD);
        let same = self.user_voice.as_ref().map(|user| user.similarity(&print) >= SAME_VOICE);
        self.last_check = same.map(|same| (end, same && after_loud));
        let room_alone = !speaking && matches!(self.last_voice, Voice::Other | Voice::Soft);
        if room_alone && after_loud && same == Some(true) {
            self.alike_room_at = Some(end);
        }
        if speaking && self.last_voice == Voice::User {
            self.turn_prints.push(print);
        }
    }

    /// How alike the user's voice and `print` are (None before the user's voice is known).
    #[cfg(test)]
    fn similarity_to_the_user(&self, print: &Voiceprint) -> Option<f32> {
        self.user_voice.as_ref().map(|user| user.similarity(print))
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
        for print in self.turn_prints.drain(..) {
            if self.user_prints.len() == USER_PRINTS {
                self.user_prints.pop_front();
            }
            self.user_prints.push_back(print);
        }
        self.user_voice = Voiceprint::mean(&self.user_prints);
    }

    /// Speech that made no turn (a backchannel, speech the agent talked through): not counted.
    pub fn speech_dropped(&mut self) {
        self.turn.clear();
        self.turn_prints.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `n` speech windows at `level`; which were taken for another voice.
    fn feed(levels: &mut VoiceLevels, n: usize, level: f32) -> Vec<bool> {
        (0..n).map(|_| levels.voice_of(level, MediaTime::ZERO, true) == Voice::Other).collect()
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
        assert_eq!(levels.voice_of(-20.0, MediaTime::ZERO, true), Voice::User);
        // Less than the margin below the user: still the user.
        assert!(feed(&mut levels, 30, -20.0 - MARGIN_DB + 0.5).iter().all(|&other| !other));
    }

    #[test]
    fn only_windows_near_the_users_level_are_loud_syllables_of_theirs() {
        let mut levels = VoiceLevels::default();
        feed(&mut levels, 50, -20.0);
        levels.turn_committed();
        assert_eq!(levels.voice_of(-20.0 - LOUD_DB + 0.5, MediaTime::ZERO, true), Voice::User);
        // Softer windows within the recent peak of a loud one: the user's softer speech or the room.
        assert_eq!(levels.voice_of(-30.0, MediaTime::ZERO, true), Voice::Unsure);
        assert_eq!(levels.voice_of(-20.0 - LOUD_DB - 0.5, MediaTime::ZERO, true), Voice::Unsure);
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

    /// A unit voiceprint pointing mostly along `axis`.
    fn print(axis: usize, lean: f32) -> Voiceprint {
        let mut values = vec![0.0; confab_models::voice_encoder::VOICEPRINT];
        values[axis] = 1.0;
        values[axis + 1] = lean;
        let norm = (1.0 + lean * lean).sqrt();
        Voiceprint(values.iter().map(|v| v / norm).collect())
    }

    /// The user heard at -20 dBFS with voiceprints along axis 0, their turn committed.
    fn user_heard() -> VoiceLevels {
        let mut levels = VoiceLevels::default();
        for i in 0..50u64 {
            levels.voice_of(-20.0, MediaTime::from_millis(32 * i), true);
            if i % 10 == 9 {
                levels.voiceprint(MediaTime::from_millis(32 * i), print(0, 0.1 * (i / 10) as f32), true);
            }
        }
        levels.turn_committed();
        levels
    }

    #[test]
    fn a_window_below_the_users_level_is_theirs_while_their_voice_is_heard() {
        let mut levels = user_heard();
        let at = MediaTime::from_millis(10_000);
        // The user, soft: the last check heard them.
        levels.voiceprint(at, print(0, 0.3), true);
        let soft: Vec<Voice> =
            (1..=25u64).map(|i| levels.voice_of(-35.0, at + MediaTime::from_millis(32 * i), true)).collect();
        assert!(soft[..9].iter().all(|&v| v == Voice::Unsure), "within the user's recent peak: {soft:?}");
        assert!(soft[9..].iter().all(|&v| v == Voice::Soft), "{soft:?}");
        // A check is good for CHECK_VALID after the audio it heard: the level decides again after it.
        assert_eq!(levels.voice_of(-35.0, at + CHECK_VALID + MediaTime::from_millis(32), true), Voice::Other);
        // The room: the check heard another voice.
        levels.voiceprint(at + MediaTime::from_millis(900), print(5, 0.3), false);
        assert_eq!(levels.voice_of(-35.0, at + MediaTime::from_millis(932), true), Voice::Other);
        // A check taken while the user spoke up, or just after, hears them, not what follows: only one
        // taken AFTER_LOUD after their last loud window speaks for the soft windows.
        let loud = at + MediaTime::from_millis(2_000);
        levels.voice_of(-20.0, loud, true);
        let soft_at = |levels: &mut VoiceLevels, ms: u64| {
            (1..=10u64).map(|i| levels.voice_of(-35.0, loud + MediaTime::from_millis(ms + 32 * i), true)).last()
        };
        levels.voiceprint(loud + AFTER_LOUD - MediaTime::from_millis(32), print(0, 0.3), true);
        assert_eq!(soft_at(&mut levels, 320), Some(Voice::Other));
        levels.voiceprint(loud + AFTER_LOUD, print(0, 0.3), true);
        assert_eq!(soft_at(&mut levels, 640), Some(Voice::Soft));
    }

    #[test]
    fn a_room_that_sounds_like_the_user_is_told_apart_by_its_level_alone() {
        let mut levels = user_heard();
        let at = MediaTime::from_millis(10_000);
        let soft = |levels: &mut VoiceLevels, from: MediaTime| {
            (1..=12u64).map(|i| levels.voice_of(-35.0, from + MediaTime::from_millis(32 * i), true)).last()
        };
        // The room alone (the user not speaking), in a voice like the user's: checks no longer speak for it.
        assert_eq!(soft(&mut levels, at), Some(Voice::Other));
        levels.voiceprint(at + MediaTime::from_millis(400), print(0, 0.2), false);
        assert_eq!(soft(&mut levels, at + MediaTime::from_millis(400)), Some(Voice::Other));
        // Within its memory, a check that hears the user's voice over soft windows does not make them Soft.
        let later = at + MediaTime::from_millis(5_000);
        levels.voiceprint(later, print(0, 0.3), true);
        assert_eq!(soft(&mut levels, later), Some(Voice::Other));
        // After it, checks speak again.
        let after = at + MediaTime::from_millis(400) + ALIKE_ROOM_MEMORY + MediaTime::from_millis(32);
        levels.voiceprint(after, print(0, 0.3), true);
        assert_eq!(soft(&mut levels, after), Some(Voice::Soft));
    }

    #[test]
    fn soft_windows_keep_a_turn_open_but_do_not_lower_the_users_level() {
        let mut levels = user_heard();
        // Turns of a few loud syllables each, after which the checks took the room for the user: their soft
        // windows are not the user's level (with them the median sank turn by turn, until the room's louder
        // moments were loud syllables of the user's and opened turns of their own).
        for turn in 0..3u64 {
            let loud = MediaTime::from_millis(10_000 + 5_000 * turn);
            for i in 0..3u64 {
                levels.voice_of(-20.0, loud - MediaTime::from_millis(32 * i), true);
            }
            let after: Vec<Voice> = (1..=60u64)
                .map(|i| {
                    let end = loud + MediaTime::from_millis(32 * i);
                    if i % 10 == 0 {
                        levels.voiceprint(end, print(0, 0.3), true);
                    }
                    levels.voice_of(-29.0, end, true)
                })
                .collect();
            assert!(after[PEAK_WINDOWS - 1..].iter().all(|&v| v == Voice::Soft), "{after:?}");
            levels.turn_committed();
            assert_eq!(levels.user_level(), Some(-20.0), "after turn {turn}");
        }
    }

    #[test]
    fn the_users_voice_is_made_of_their_committed_turns_only() {
        let mut levels = VoiceLevels::default();
        // Before any turn is committed a check has nothing to compare with.
        levels.voiceprint(MediaTime::from_millis(320), print(0, 0.0), true);
        assert_eq!(levels.similarity_to_the_user(&print(0, 0.0)), None);
        // Speech that made no turn (here: the room, along axis 7) does not become the user's voice.
        levels.voice_of(-20.0, MediaTime::from_millis(352), true);
        levels.voiceprint(MediaTime::from_millis(640), print(7, 0.0), true);
        levels.speech_dropped();
        levels.voice_of(-20.0, MediaTime::from_millis(960), true);
        levels.voiceprint(MediaTime::from_millis(960), print(0, 0.0), true);
        levels.turn_committed();
        let user = levels.similarity_to_the_user(&print(0, 0.0)).unwrap();
        let room = levels.similarity_to_the_user(&print(7, 0.0)).unwrap();
        assert!((user - 1.0).abs() < 1e-6 && room.abs() < 1e-6, "user {user} room {room}");
        // Nor is a stretch that ended on a window that was not a loud one of the user's.
        levels.voice_of(-40.0, MediaTime::from_millis(1_400), true);
        levels.voiceprint(MediaTime::from_millis(1_400), print(7, 0.0), true);
        levels.turn_committed();
        assert!(levels.similarity_to_the_user(&print(7, 0.0)).unwrap().abs() < 1e-6);
    }
}
