//! Splits streaming LLM text into sentences for TTS: each sentence goes to synthesis as soon as it ends.

/// Shortest text sent on its own; shorter sentences ("Hi.") wait to join the next one.
pub const MIN_SENTENCE_CHARS: usize = 8;

#[derive(Debug, Default)]
pub struct SentenceSplitter {
    pending: String,
}

fn is_boundary(text: &str, index: usize, ch: char) -> bool {
    if !matches!(ch, '.' | '!' | '?' | ';' | '\n') {
        return false;
    }
    // The end of a sentence is followed by whitespace (so "3.5" and "e.g." inside words do not split).
    let next = text[index + ch.len_utf8()..].chars().next();
    ch == '\n' || next.is_some_and(char::is_whitespace)
}

impl SentenceSplitter {
    /// Adds streamed text; returns the sentences it completed.
    pub fn push(&mut self, text: &str) -> Vec<String> {
        self.pending.push_str(text);
        let mut sentences = Vec::new();
        loop {
            let boundary = self.pending.char_indices().find(|&(i, ch)| {
                is_boundary(&self.pending, i, ch) && self.pending[..=i].trim().chars().count() >= MIN_SENTENCE_CHARS
            });
            let Some((index, ch)) = boundary else { break };
            let end = index + ch.len_utf8();
            let sentence = self.pending[..end].trim().to_string();
            self.pending.drain(..end);
            if !sentence.is_empty() {
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
}
