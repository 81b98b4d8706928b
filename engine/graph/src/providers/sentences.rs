//! Splits streaming LLM text into pieces for TTS: each piece goes to synthesis as soon as it ends. The
//! reply's first piece ends at its first clause (a comma, colon or dash after a few words), or before the
//! first word that opens a phrase after a few words ("The capital of Japan | is Tokyo."), so the agent
//! starts speaking early; the rest is split at sentence ends, which keeps the voice's prosody whole.

use std::borrow::Cow;

/// Shortest text sent on its own; shorter sentences ("Hi.") wait to join the next one.
pub const MIN_SENTENCE_CHARS: usize = 8;
/// Fewest words before a clause boundary ends the reply's first piece ("The capital of France," yes;
/// "Well," no: it waits for more).
pub const MIN_CLAUSE_WORDS: usize = 4;

/// English words that open a phrase (a verb after its subject, a preposition, a conjunction): a reply's
/// first sentence is cut before the first of them that follows `MIN_CLAUSE_WORDS` words, where a speaker
/// could pause. Measured on the default model's answers (docs/performance.md, issue 52): the first audio
/// comes two to four tokens and a shorter synthesis earlier. Other languages' sentences are not cut there.
const PHRASE_OPENERS: &[&str] = &[
    "is", "are", "was", "were", "has", "have", "had", "can", "will", "would", "could", "should", "may", "might",
    "must", "in", "on", "at", "of", "for", "with", "from", "to", "by", "about", "into", "during", "after", "before",
    "and", "but", "or", "because", "which", "that", "who", "where", "when", "while", "so", "than",
];

/// A piece of the reply for the voice.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Piece {
    pub text: String,
    /// The piece ends inside its sentence, before a phrase (the reply's first piece, cut early).
    pub goes_on: bool,
}

impl Piece {
    /// What the voice is given: a piece cut inside its sentence ends as a clause that goes on (a comma),
    /// so that its intonation does not fall as at a sentence's end; the text said stays the piece's own.
    pub fn voiced(&self) -> Cow<'_, str> {
        if self.goes_on { Cow::Owned(format!("{},", self.text)) } else { Cow::Borrowed(&self.text) }
    }
}

impl From<String> for Piece {
    fn from(text: String) -> Piece {
        Piece { text, goes_on: false }
    }
}

#[derive(Debug, Default)]
pub struct SentenceSplitter {
    pending: String,
    /// A piece has been emitted: from now on only sentence ends split.
    started: bool,
}

/// `ch` at `index` ends a sentence: followed by whitespace (so "3.5" and "e.g." inside words do not split).
fn is_boundary(text: &str, index: usize, ch: char) -> bool {
    if !matches!(ch, '.' | '!' | '?' | ';' | '\n') {
        return false;
    }
    let next = text[index + ch.len_utf8()..].chars().next();
    ch == '\n' || next.is_some_and(char::is_whitespace)
}

/// `ch` at `index` ends a clause of at least `MIN_CLAUSE_WORDS` words, and is followed by whitespace
/// (so "1,000" does not split).
fn is_clause_boundary(text: &str, index: usize, ch: char) -> bool {
    if !matches!(ch, ',' | ':' | '—' | '–') {
        return false;
    }
    let next = text[index + ch.len_utf8()..].chars().next();
    next.is_some_and(char::is_whitespace) && text[..index].split_whitespace().count() >= MIN_CLAUSE_WORDS
}

/// Where the first sentence of `text` may be cut before a phrase: the start of the first word of
/// [`PHRASE_OPENERS`] (begun: the stream may not have sent all of it) after `MIN_CLAUSE_WORDS` words, the
/// last of them not ending in punctuation.
fn phrase_start(text: &str) -> Option<usize> {
    let mut words = 0;
    let mut previous_end = None;
    for (start, word) in text.split_whitespace().map(|word| (word.as_ptr() as usize - text.as_ptr() as usize, word)) {
        let opens = words >= MIN_CLAUSE_WORDS
            && previous_end.is_some_and(|end| text[..end].ends_with(|c: char| c.is_alphanumeric()))
            && PHRASE_OPENERS.iter().any(|opener| opener.eq_ignore_ascii_case(word));
        if opens {
            return Some(start);
        }
        words += usize::from(word.chars().any(char::is_alphanumeric));
        previous_end = Some(start + word.len());
    }
    None
}

impl SentenceSplitter {
    /// Adds streamed text; returns the pieces it completed.
    pub fn push(&mut self, text: &str) -> Vec<Piece> {
        self.pending.push_str(text);
        let mut pieces = Vec::new();
        loop {
            let first = !self.started;
            let boundary = self.pending.char_indices().find(|&(i, ch)| {
                (is_boundary(&self.pending, i, ch) && self.pending[..=i].trim().chars().count() >= MIN_SENTENCE_CHARS)
                    || (first && is_clause_boundary(&self.pending, i, ch))
            });
            let boundary = boundary.map(|(index, ch)| (index + ch.len_utf8(), false));
            let phrase = if first { phrase_start(&self.pending).map(|start| (start, true)) } else { None };
            // The earlier of the two; a sentence's end where both fall at once.
            let Some((end, goes_on)) = boundary.into_iter().chain(phrase).min_by_key(|&(at, _)| at) else { break };
            let text = self.pending[..end].trim().to_string();
            self.pending.drain(..end);
            if !text.is_empty() {
                self.started = true;
                pieces.push(Piece { text, goes_on });
            }
        }
        pieces
    }

    /// The rest, when the stream has ended.
    pub fn finish(&mut self) -> Option<Piece> {
        let rest = std::mem::take(&mut self.pending).trim().to_string();
        (!rest.is_empty()).then_some(Piece::from(rest))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_streamed_text_at_sentence_ends() {
        let mut s = SentenceSplitter::default();
        let mut out = Vec::new();
        for piece in ["Hi. The museum", " opens at 9.30 today", "! Tickets cost", " $5. Enjoy"] {
            out.extend(s.push(piece).into_iter().map(|piece| piece.text));
        }
        out.extend(s.finish().map(|piece| piece.text));
        // "Hi." is too short alone; the first piece ends before "at" (a phrase after four words).
        assert_eq!(out, ["Hi. The museum opens", "at 9.30 today!", "Tickets cost $5.", "Enjoy"]);
    }

    fn split(pieces: &[&str]) -> Vec<String> {
        let mut s = SentenceSplitter::default();
        let mut out: Vec<String> =
            pieces.iter().flat_map(|piece| s.push(piece)).map(|piece| piece.voiced().into_owned()).collect();
        out.extend(s.finish().map(|piece| piece.text));
        out
    }

    #[test]
    fn the_first_clause_is_spoken_on_its_own_then_whole_sentences() {
        assert_eq!(
            split(&["The capital of", " France, as you", " may know, is Paris", ". It has 2,100,000 people, roughly."]),
            ["The capital of France,", "as you may know, is Paris.", "It has 2,100,000 people, roughly."]
        );
    }

    #[test]
    fn a_short_opening_or_a_number_does_not_split_a_clause() {
        assert_eq!(split(&["Well, I think so. Yes"]), ["Well, I think so.", "Yes"]);
        assert_eq!(
            split(&["About 1,000 people came: many", " more than expected."]),
            ["About 1,000 people came:", "many more than expected."]
        );
        assert_eq!(split(&["Paris — the capital of France."]), ["Paris — the capital of France."]);
    }

    #[test]
    fn the_first_sentence_is_cut_before_a_phrase_after_a_few_words_and_voiced_as_going_on() {
        // Token by token, as a model streams: cut as soon as the opener begins.
        let mut s = SentenceSplitter::default();
        let mut pieces = Vec::new();
        for token in ["The", " capital", " of", " Japan", " is", " Tokyo", "."] {
            pieces.extend(s.push(token));
        }
        pieces.extend(s.finish());
        assert_eq!(
            pieces,
            [
                Piece { text: "The capital of Japan".into(), goes_on: true },
                Piece { text: "is Tokyo.".into(), goes_on: false }
            ]
        );
        assert_eq!(pieces[0].voiced(), "The capital of Japan,");
        assert_eq!(pieces[1].voiced(), "is Tokyo.");
        assert_eq!(
            split(&["There are 12 months in a year. A year has four seasons in it."]),
            ["There are 12 months,", "in a year.", "A year has four seasons in it."]
        );
        // Fewer than four words before the opener, no opener, or a comma first: as before.
        assert_eq!(split(&["A spider has eight legs."]), ["A spider has eight legs."]);
        assert_eq!(split(&["Bees make honey in hives."]), ["Bees make honey in hives."]);
        assert_eq!(split(&["Well, the capital of Japan is Tokyo."]), ["Well, the capital of Japan,", "is Tokyo."]);
        // A dash is not a word; nor is a word that ends in punctuation cut after (the clause rule decides).
        assert_eq!(split(&["Paris — the capital of France."]), ["Paris — the capital of France."]);
        assert_eq!(split(&["The cat called \"Tom\" and the dog."]), ["The cat called \"Tom\" and the dog."]);
    }
}
