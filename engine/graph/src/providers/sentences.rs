//! Splits streaming LLM text into pieces for TTS: each piece goes to synthesis as soon as it ends. The
//! reply's first piece ends at its first clause (a comma, colon or dash after a few words) so the agent
//! starts speaking early; the rest is split at sentence ends, which keeps the voice's prosody whole.

/// Shortest text sent on its own; shorter sentences ("Hi.") wait to join the next one.
pub const MIN_SENTENCE_CHARS: usize = 8;
/// Fewest words before a clause boundary ends the reply's first piece ("The capital of France," yes;
/// "Well," no: it waits for more).
pub const MIN_CLAUSE_WORDS: usize = 4;

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

impl SentenceSplitter {
    /// Adds streamed text; returns the sentences it completed.
    pub fn push(&mut self, text: &str) -> Vec<String> {
        self.pending.push_str(text);
        let mut sentences = Vec::new();
        loop {
            let first = !self.started;
            let boundary = self.pending.char_indices().find(|&(i, ch)| {
                (is_boundary(&self.pending, i, ch) && self.pending[..=i].trim().chars().count() >= MIN_SENTENCE_CHARS)
                    || (first && is_clause_boundary(&self.pending, i, ch))
            });
            let Some((index, ch)) = boundary else { break };
            let end = index + ch.len_utf8();
            let sentence = self.pending[..end].trim().to_string();
            self.pending.drain(..end);
            if !sentence.is_empty() {
                self.started = true;
                sentences.push(sentence);
            }
        }
        sentences
    }

    /// The rest, when the stream has ended.
    pub fn finish(&mut self) -> Option<String> {
        let rest = std::mem::take(&mut self.pending).trim().to_string();
        (!rest.is_empty()).then_some(rest)
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
            out.extend(s.push(piece));
        }
        out.extend(s.finish());
        assert_eq!(out, ["Hi. The museum opens at 9.30 today!", "Tickets cost $5.", "Enjoy"]);
    }

    fn split(pieces: &[&str]) -> Vec<String> {
        let mut s = SentenceSplitter::default();
        let mut out: Vec<String> = pieces.iter().flat_map(|piece| s.push(piece)).collect();
        out.extend(s.finish());
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
}
