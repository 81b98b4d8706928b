//! Playout: paces the agent's synthesized audio onto the media clock and knows exactly what the user has
//! heard. It renders fixed frames of audio, pauses and resumes for overlapping user speech, flushes on
//! interruption, and reports the agent starting and stopping speaking — on stop, with the text the user
//! actually heard (truncated at the playout position when interrupted).
//!
//! A segment may arrive open (its first audio only, from a speech provider that streams) and grow
//! (`PlayoutPiece::More`) until its last audio closes it: playout starts at the first audio, and if it
//! catches up with an open segment it plays silence until more comes, still speaking.
//!
//! The agent always stops: a reply ends when its last segment has played and its producer said it is done
//! (in turn order: a later turn's end covers the earlier ones), and a reply that plays nothing for
//! [`PLAYOUT_STALL`] is stopped by the watchdog (`poll_timeout`, `handle_timeout`).

use std::collections::VecDeque;

use super::{Epoch, TurnId};
use crate::time::MediaTime;

/// One synthesized sentence: its text and its audio at 16 kHz.
#[derive(Debug, Clone, PartialEq)]
pub struct PlayoutSegment {
    pub turn: TurnId,
    pub epoch: Epoch,
    pub text: String,
    pub audio: Vec<f32>,
    /// More audio of this sentence follows (`PlayoutPiece::More`).
    pub open: bool,
}

/// What a reply hands to playout: a new segment, or more audio for the open one.
#[derive(Debug, Clone, PartialEq)]
pub enum PlayoutPiece {
    Segment(PlayoutSegment),
    /// The next audio of the open segment of `epoch`; `last` closes it.
    More {
        epoch: Epoch,
        audio: Vec<f32>,
        last: bool,
    },
}

/// A reply that plays no audio for this long while the agent is speaking is over: the agent stops, with
/// what was heard (`agent.stopped_speaking`, the assistant's transcript entry). Longer than any wait a
/// working reply has between its sentences (a tool call, 10 s at most, then the model's next words).
pub const PLAYOUT_STALL: MediaTime = MediaTime::from_millis(20_000);

/// The agent's level while speech over it is judged (`duck`): −6 dB, a dip, not a stop.
pub const DUCKED_GAIN: f32 = 0.5;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PlayoutOutput {
    AgentStartedSpeaking { at: MediaTime, turn: TurnId, text: String },
    AgentStoppedSpeaking { at: MediaTime, turn: TurnId, heard: String, interrupted: bool },
}

#[derive(Debug)]
pub struct Playout {
    queue: VecDeque<PlayoutSegment>,
    /// Samples of the front segment already played.
    position: usize,
    epoch: Epoch,
    paused: bool,
    /// The level the agent is played at (1, or `DUCKED_GAIN` while ducked) and the one it goes to: a change
    /// is spread over the next frame, so it makes no click.
    gain: f32,
    target_gain: f32,
    /// The reply being spoken: its turn and the text heard so far (whole segments).
    speaking: Option<(TurnId, String)>,
    /// The latest turn whose reply has no more segments to come. Replies are produced one at a time, in
    /// the order of their turns, so every turn up to it is finished too: a second reply can end while the
    /// first is still playing (two short user turns in a row), and must not leave the first speaking.
    finished_through: Option<TurnId>,
    /// When the reply being spoken last played audio (or started): a reply that plays nothing for
    /// `PLAYOUT_STALL` is over (`poll_timeout`).
    last_progress: MediaTime,
    outputs: VecDeque<PlayoutOutput>,
}

impl Default for Playout {
    fn default() -> Self {
        Playout::new()
    }
}

impl Playout {
    pub fn new() -> Playout {
        Playout {
            queue: VecDeque::with_capacity(16),
            position: 0,
            epoch: Epoch(0),
            paused: false,
            gain: 1.0,
            target_gain: 1.0,
            speaking: None,
            finished_through: None,
            last_progress: MediaTime::ZERO,
            outputs: VecDeque::with_capacity(4),
        }
    }

    pub fn is_speaking(&self) -> bool {
        self.speaking.is_some()
    }

    /// True while there is audio queued or being played.
    pub fn has_audio(&self) -> bool {
        self.speaking.is_some() || !self.queue.is_empty()
    }

    /// Queues a segment; segments of a past epoch are stale and dropped.
    pub fn enqueue(&mut self, segment: PlayoutSegment) {
        if segment.epoch >= self.epoch {
            self.queue.push_back(segment);
        }
    }

    /// A new segment, or more audio for the open one (stale epochs are dropped).
    pub fn push(&mut self, piece: PlayoutPiece) {
        match piece {
            PlayoutPiece::Segment(segment) => self.enqueue(segment),
            PlayoutPiece::More { epoch, audio, last } => {
                if epoch < self.epoch {
                    return;
                }
                if let Some(open) = self.queue.iter_mut().rev().find(|s| s.open && s.epoch == epoch) {
                    open.audio.extend_from_slice(&audio);
                    open.open = !last;
                }
            }
        }
    }

    /// No more segments will come for `turn`.
    pub fn end_of_reply(&mut self, turn: TurnId, now: MediaTime) {
        self.finished_through = self.finished_through.max(Some(turn));
        self.stop_if_done(now);
    }

    pub fn pause(&mut self) {
        self.paused = true;
    }

    pub fn is_paused(&self) -> bool {
        self.paused
    }

    pub fn resume(&mut self) {
        self.paused = false;
    }

    /// The agent's voice dips to `DUCKED_GAIN` (speech over it is being judged).
    pub fn duck(&mut self) {
        self.target_gain = DUCKED_GAIN;
    }

    /// The agent's voice back to its level.
    pub fn restore(&mut self) {
        self.target_gain = 1.0;
    }

    /// Interruption: drops everything queued, moves to `epoch`, and reports what was heard.
    pub fn flush(&mut self, epoch: Epoch, now: MediaTime) {
        self.drop_reply(epoch, now, true);
    }

    fn drop_reply(&mut self, epoch: Epoch, now: MediaTime, interrupted: bool) {
        self.epoch = epoch;
        self.paused = false;
        self.restore();
        if let Some((turn, mut heard)) = self.speaking.take() {
            if let Some(front) = self.queue.front() {
                append_words(&mut heard, heard_prefix(&front.text, self.position, front.audio.len()));
            }
            self.outputs.push_back(PlayoutOutput::AgentStoppedSpeaking { at: now, turn, heard, interrupted });
        }
        self.queue.clear();
        self.position = 0;
    }

    /// When the reply being spoken will have played nothing for `PLAYOUT_STALL`: its producer stalled (a
    /// speech stream that never closes its sentence, a reply that never ends, a pause that never resumes).
    pub fn poll_timeout(&self) -> Option<MediaTime> {
        self.speaking.as_ref().map(|_| self.last_progress + PLAYOUT_STALL)
    }

    /// The watchdog: a reply that has played nothing since `PLAYOUT_STALL` stops where it is, reporting
    /// what was heard, and everything queued is dropped (`epoch`: the reply's producers are cancelled).
    /// True when it fired.
    pub fn handle_timeout(&mut self, now: MediaTime, epoch: Epoch) -> bool {
        if self.poll_timeout().is_some_and(|deadline| now >= deadline) {
            self.drop_reply(epoch, now, false);
            return true;
        }
        false
    }

    /// Fills `out` with the next frame of audio starting at `now` (silence where nothing plays).
    pub fn render(&mut self, now: MediaTime, out: &mut [f32]) {
        let mut written = 0;
        while written < out.len() && !self.paused {
            let Some(front) = self.queue.front() else {
                break;
            };
            if self.speaking.is_none() {
                let at = now + MediaTime(written as u64);
                let text = self
                    .queue
                    .iter()
                    .filter(|s| s.turn == front.turn)
                    .map(|s| s.text.as_str())
                    .collect::<Vec<_>>()
                    .join(" ");
                self.outputs.push_back(PlayoutOutput::AgentStartedSpeaking { at, turn: front.turn, text });
                self.speaking = Some((front.turn, String::new()));
                self.last_progress = at;
            }
            if self.position == front.audio.len() && front.open {
                break; // caught up with a segment still arriving: silence until more comes
            }
            let n = (front.audio.len() - self.position).min(out.len() - written);
            out[written..written + n].copy_from_slice(&front.audio[self.position..self.position + n]);
            written += n;
            self.last_progress = now + MediaTime(written as u64);
            self.position += n;
            if self.position == front.audio.len() && !front.open {
                let done = self.queue.pop_front().expect("front exists");
                self.position = 0;
                if let Some((_, heard)) = &mut self.speaking {
                    append_words(heard, &done.text);
                }
                self.stop_if_done(now + MediaTime(written as u64));
            }
        }
        self.apply_gain(&mut out[..written]);
        out[written..].fill(0.0);
    }

    /// Scales `audio` by the gain, moving it to its target over these samples.
    fn apply_gain(&mut self, audio: &mut [f32]) {
        if self.gain == 1.0 && self.target_gain == 1.0 {
            return;
        }
        let (from, change, n) = (self.gain, self.target_gain - self.gain, audio.len() as f32);
        for (i, sample) in audio.iter_mut().enumerate() {
            *sample *= from + change * ((i + 1) as f32 / n);
        }
        if !audio.is_empty() {
            self.gain = self.target_gain;
        }
    }

    fn stop_if_done(&mut self, at: MediaTime) {
        let Some((turn, _)) = &self.speaking else {
            return;
        };
        let more_of_this_turn = self.queue.front().is_some_and(|s| s.turn == *turn);
        if !more_of_this_turn && self.finished_through >= Some(*turn) {
            let (turn, heard) = self.speaking.take().expect("speaking");
            self.outputs.push_back(PlayoutOutput::AgentStoppedSpeaking { at, turn, heard, interrupted: false });
        }
    }

    pub fn poll_output(&mut self) -> Option<PlayoutOutput> {
        self.outputs.pop_front()
    }
}

fn append_words(heard: &mut String, text: &str) {
    if text.is_empty() {
        return;
    }
    if !heard.is_empty() {
        heard.push(' ');
    }
    heard.push_str(text);
}

/// The words of `text` heard after `played` of `total` samples: speech is assumed to spread evenly over
/// the characters, and only words whose last character was reached count.
pub fn heard_prefix(text: &str, played: usize, total: usize) -> &str {
    if total == 0 || played >= total {
        return text;
    }
    let reached = (text.len() as u128 * played as u128 / total as u128) as usize;
    let mut end = 0;
    for (index, _) in text.match_indices(char::is_whitespace) {
        if index <= reached {
            end = index;
        } else {
            break;
        }
    }
    text[..end].trim_end()
}

#[cfg(test)]
mod tests {
    use super::*;

    const FRAME: usize = 320; // 20 ms

    fn segment(turn: u64, text: &str, samples: usize) -> PlayoutSegment {
        PlayoutSegment {
            turn: TurnId(turn),
            epoch: Epoch(0),
            text: text.into(),
            audio: vec![0.5; samples],
            open: false,
        }
    }

    fn render_frames(p: &mut Playout, from_frame: u64, frames: u64) -> Vec<PlayoutOutput> {
        let mut buf = [0.0f32; FRAME];
        let mut out = Vec::new();
        for f in from_frame..from_frame + frames {
            p.render(MediaTime(f * FRAME as u64), &mut buf);
            out.extend(std::iter::from_fn(|| p.poll_output()));
        }
        out
    }

    #[test]
    fn plays_a_reply_and_reports_exact_start_and_stop() {
        let mut p = Playout::new();
        p.enqueue(segment(1, "Hello there.", 800));
        p.enqueue(segment(1, "How can I help?", 500));
        p.end_of_reply(TurnId(1), MediaTime(0));
        let out = render_frames(&mut p, 10, 10);
        assert_eq!(
            out,
            vec![
                PlayoutOutput::AgentStartedSpeaking {
                    at: MediaTime(3200),
                    turn: TurnId(1),
                    text: "Hello there. How can I help?".into()
                },
                PlayoutOutput::AgentStoppedSpeaking {
                    at: MediaTime(3200 + 1300),
                    turn: TurnId(1),
                    heard: "Hello there. How can I help?".into(),
                    interrupted: false
                },
            ]
        );
    }

    #[test]
    fn rendered_audio_is_the_queued_audio_then_silence() {
        let mut p = Playout::new();
        p.enqueue(segment(1, "a", 400));
        let mut buf = [9.0f32; FRAME];
        p.render(MediaTime(0), &mut buf);
        assert!(buf.iter().all(|s| *s == 0.5));
        p.render(MediaTime(320), &mut buf);
        assert!(buf[..80].iter().all(|s| *s == 0.5) && buf[80..].iter().all(|s| *s == 0.0));
    }

    /// Ducking dips the voice over one frame and holds it there (no gap, no click); restoring brings it back
    /// over the next.
    #[test]
    fn a_ducked_voice_dips_smoothly_and_comes_back() {
        let mut p = Playout::new();
        p.enqueue(segment(1, "a long sentence", FRAME * 4));
        let mut buf = [0.0f32; FRAME];
        p.duck();
        p.render(MediaTime(0), &mut buf);
        assert!(buf.windows(2).all(|w| w[1] <= w[0]) && buf[FRAME - 1] == 0.5 * DUCKED_GAIN, "{:?}", &buf[..4]);
        p.render(MediaTime(FRAME as u64), &mut buf);
        assert!(buf.iter().all(|s| *s == 0.5 * DUCKED_GAIN));
        p.restore();
        p.render(MediaTime(2 * FRAME as u64), &mut buf);
        assert!(buf.windows(2).all(|w| w[1] >= w[0]) && buf[FRAME - 1] == 0.5);
        p.render(MediaTime(3 * FRAME as u64), &mut buf);
        assert!(buf.iter().all(|s| *s == 0.5));
    }

    #[test]
    fn flush_truncates_to_what_was_heard() {
        let mut p = Playout::new();
        p.enqueue(segment(1, "First sentence.", 640));
        p.enqueue(segment(1, "one two three four", 1800));
        // 1280 samples: the first segment, then 640 of 1800 ("one tw" of "one two three four").
        let mut out = render_frames(&mut p, 0, 4);
        p.flush(Epoch(1), MediaTime(1280));
        out.extend(std::iter::from_fn(|| p.poll_output()));
        assert_eq!(
            out.last(),
            Some(&PlayoutOutput::AgentStoppedSpeaking {
                at: MediaTime(1280),
                turn: TurnId(1),
                heard: "First sentence. one".into(),
                interrupted: true
            })
        );
        // Stale audio from the old epoch is dropped.
        p.enqueue(segment(1, "late", 320));
        assert_eq!(render_frames(&mut p, 4, 2), vec![]);
    }

    #[test]
    fn pause_holds_the_position() {
        let mut p = Playout::new();
        p.enqueue(segment(1, "a b", 640));
        p.end_of_reply(TurnId(1), MediaTime(0));
        render_frames(&mut p, 0, 1);
        p.pause();
        assert_eq!(render_frames(&mut p, 1, 5), vec![]);
        p.resume();
        let out = render_frames(&mut p, 6, 1);
        assert_eq!(
            out,
            vec![PlayoutOutput::AgentStoppedSpeaking {
                at: MediaTime(6 * 320 + 320),
                turn: TurnId(1),
                heard: "a b".into(),
                interrupted: false
            }]
        );
    }

    #[test]
    fn an_open_segment_plays_as_it_arrives_and_waits_in_silence_for_more() {
        let mut p = Playout::new();
        p.push(PlayoutPiece::Segment(PlayoutSegment { open: true, ..segment(1, "Hello there.", 480) }));
        let mut buf = [9.0f32; FRAME];
        p.render(MediaTime(0), &mut buf);
        assert!(buf.iter().all(|s| *s == 0.5));
        // 160 samples left, then silence: the segment is still arriving, the agent still speaking.
        p.render(MediaTime(320), &mut buf);
        assert!(buf[..160].iter().all(|s| *s == 0.5) && buf[160..].iter().all(|s| *s == 0.0));
        p.end_of_reply(TurnId(1), MediaTime(640));
        assert!(p.is_speaking());
        p.push(PlayoutPiece::More { epoch: Epoch(0), audio: vec![0.25; 320], last: false });
        p.push(PlayoutPiece::More { epoch: Epoch(0), audio: vec![], last: true });
        let out = render_frames(&mut p, 2, 2);
        assert_eq!(
            out,
            vec![
                PlayoutOutput::AgentStartedSpeaking { at: MediaTime(0), turn: TurnId(1), text: "Hello there.".into() },
                PlayoutOutput::AgentStoppedSpeaking {
                    at: MediaTime(640 + 320),
                    turn: TurnId(1),
                    heard: "Hello there.".into(),
                    interrupted: false
                },
            ]
        );
        // More audio for a flushed epoch is dropped.
        p.flush(Epoch(1), MediaTime(1280));
        p.push(PlayoutPiece::More { epoch: Epoch(0), audio: vec![0.5; 320], last: true });
        assert!(!p.has_audio());
    }

    /// Two user turns in a row: the second reply is produced and ends while the first is still playing.
    /// Each reply starts and stops in turn (the first once stayed speaking for ever, the second's audio
    /// played under it).
    #[test]
    fn a_reply_that_ends_while_an_earlier_one_plays_leaves_neither_speaking() {
        let mut p = Playout::new();
        p.enqueue(segment(1, "Sure.", 640));
        p.end_of_reply(TurnId(1), MediaTime(0));
        let mut out = render_frames(&mut p, 0, 1);
        p.enqueue(segment(2, "Paris.", 320));
        p.end_of_reply(TurnId(2), MediaTime(320));
        out.extend(render_frames(&mut p, 1, 3));
        assert_eq!(
            out,
            vec![
                PlayoutOutput::AgentStartedSpeaking { at: MediaTime(0), turn: TurnId(1), text: "Sure.".into() },
                PlayoutOutput::AgentStoppedSpeaking {
                    at: MediaTime(640),
                    turn: TurnId(1),
                    heard: "Sure.".into(),
                    interrupted: false
                },
                PlayoutOutput::AgentStartedSpeaking { at: MediaTime(640), turn: TurnId(2), text: "Paris.".into() },
                PlayoutOutput::AgentStoppedSpeaking {
                    at: MediaTime(960),
                    turn: TurnId(2),
                    heard: "Paris.".into(),
                    interrupted: false
                },
            ]
        );
        assert_eq!(p.poll_timeout(), None, "nobody is speaking");
    }

    /// The watchdog: a sentence whose audio stops arriving (its stream never closes) plays silence while
    /// the agent speaks, then, `PLAYOUT_STALL` after its last audio, the agent stops with what was heard and
    /// the queue is dropped; nothing fires a frame earlier.
    #[test]
    fn a_reply_that_plays_nothing_for_the_stall_limit_is_stopped() {
        let mut p = Playout::new();
        p.push(PlayoutPiece::Segment(PlayoutSegment { open: true, ..segment(1, "one two three four", 480) }));
        p.enqueue(segment(1, "Never heard.", 320));
        let out = render_frames(&mut p, 0, 2);
        assert_eq!(out.len(), 1, "started: {out:?}");
        let deadline = MediaTime(480) + PLAYOUT_STALL;
        assert_eq!(p.poll_timeout(), Some(deadline));
        assert!(!p.handle_timeout(deadline - MediaTime(1), Epoch(1)));
        assert_eq!(p.poll_output(), None);
        assert!(p.handle_timeout(deadline, Epoch(1)));
        assert_eq!(
            p.poll_output(),
            Some(PlayoutOutput::AgentStoppedSpeaking {
                at: deadline,
                turn: TurnId(1),
                heard: "one two three four".into(),
                interrupted: false
            })
        );
        assert!(!p.has_audio());
        assert_eq!(p.poll_timeout(), None);
        p.push(PlayoutPiece::More { epoch: Epoch(0), audio: vec![0.5; 320], last: true });
        assert!(!p.has_audio(), "the stalled reply's late audio is stale");
    }

    /// A pause that never resumes (the user's overlapping speech neither ends nor interrupts) is a stall too.
    #[test]
    fn a_pause_that_never_resumes_is_stopped_by_the_watchdog() {
        let mut p = Playout::new();
        p.enqueue(segment(1, "a b", 640));
        render_frames(&mut p, 0, 1);
        p.pause();
        assert_eq!(p.poll_timeout(), Some(MediaTime(320) + PLAYOUT_STALL));
        let frames = PLAYOUT_STALL.samples() / FRAME as u64;
        assert_eq!(render_frames(&mut p, 1, frames), vec![]);
        assert!(p.handle_timeout(MediaTime(320) + PLAYOUT_STALL, Epoch(1)));
        assert!(matches!(p.poll_output(), Some(PlayoutOutput::AgentStoppedSpeaking { interrupted: false, .. })));
    }

    #[test]
    fn heard_prefix_keeps_whole_words_only() {
        assert_eq!(heard_prefix("one two three four", 0, 100), "");
        assert_eq!(heard_prefix("one two three four", 50, 100), "one two");
        assert_eq!(heard_prefix("one two three four", 100, 100), "one two three four");
        assert_eq!(heard_prefix("", 5, 10), "");
    }
}
