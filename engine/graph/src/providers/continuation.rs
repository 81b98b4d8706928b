//! Continuing a reply on another language model after the first one's stream broke mid-reply: the next
//! one is told what was already said and asked for the rest (OpenAI-compatible servers do not continue a
//! trailing assistant message), and whatever it repeats of what was said is dropped, so nothing already
//! voiced is voiced again.

use super::llm::{ChatMessage, ChatRequest};

/// Tells the next model that its reply was cut off.
pub const CONTINUE_INSTRUCTION: &str = "Your reply above was cut off after its last word. Continue it from \
exactly there, in the same voice: do not repeat what you already said and do not start over.";

/// `request` continued after `said`: the reply so far as the assistant's message, then the instruction.
pub fn continuation_request(request: &ChatRequest, said: &str) -> ChatRequest {
    let mut continued = request.clone();
    continued.messages.push(ChatMessage::new("assistant", said));
    continued.messages.push(ChatMessage::new("system", CONTINUE_INSTRUCTION));
    continued
}

/// A word as compared: lower case, letters, digits and apostrophes only.
fn normal(word: &str) -> String {
    word.chars().filter(|c| c.is_alphanumeric() || *c == '\'').flat_map(char::to_lowercase).collect()
}

/// Drops from the start of a continuation whatever it repeats of the end of what was said: the whole
/// reply said again, or its last words.
#[derive(Debug)]
pub struct OverlapFilter {
    said: Vec<String>,
    /// Whether what was said ended between words (else the continuation's text needs a space first).
    said_ends_in_space: bool,
    pending: String,
    decided: bool,
}

impl OverlapFilter {
    pub fn new(said: &str) -> OverlapFilter {
        OverlapFilter {
            said: said.split_whitespace().map(normal).collect(),
            said_ends_in_space: said.is_empty() || said.ends_with(char::is_whitespace),
            pending: String::new(),
            decided: false,
        }
    }

    /// More of the continuation; what of it to pass on now (empty while the overlap is undecided).
    pub fn push(&mut self, text: &str) -> String {
        if self.decided {
            return text.to_string();
        }
        self.pending.push_str(text);
        self.decide(false).unwrap_or_default()
    }

    /// The continuation ended: what is still held back, less any overlap.
    pub fn finish(&mut self) -> String {
        if self.decided { String::new() } else { self.decide(true).unwrap_or_default() }
    }

    fn decide(&mut self, at_end: bool) -> Option<String> {
        let words: Vec<(usize, &str)> = self
            .pending
            .split_whitespace()
            .map(|word| (word.as_ptr() as usize - self.pending.as_ptr() as usize, word))
            .collect();
        let complete = if at_end || self.pending.ends_with(char::is_whitespace) {
            words.len()
        } else {
            words.len().saturating_sub(1)
        };
        let heard: Vec<String> = words[..complete].iter().map(|(_, w)| normal(w)).collect();
        let suffixes = (0..self.said.len()).map(|start| &self.said[start..]);
        let still_possible = suffixes.clone().any(|suffix| heard.len() < suffix.len() && suffix.starts_with(&heard));
        if !at_end && (heard.is_empty() || still_possible) {
            return None;
        }
        let repeated =
            suffixes.filter(|suffix| heard.starts_with(suffix)).map(|suffix| suffix.len()).max().unwrap_or(0);
        self.decided = true;
        let rest = match words.get(repeated) {
            Some((offset, _)) if repeated > 0 => &self.pending[*offset..],
            Some(_) => self.pending.trim_start(),
            None if repeated > 0 => "",
            None => self.pending.trim_start(),
        };
        let starts_with_mark = rest.starts_with(|c: char| c.is_ascii_punctuation());
        let out = if !rest.is_empty() && !self.said_ends_in_space && !starts_with_mark {
            format!(" {rest}")
        } else {
            rest.to_string()
        };
        self.pending.clear();
        Some(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The continuation streamed in `pieces`; what passes the filter.
    fn filtered(said: &str, pieces: &[&str]) -> String {
        let mut filter = OverlapFilter::new(said);
        let mut out: String = pieces.iter().map(|piece| filter.push(piece)).collect();
        out.push_str(&filter.finish());
        out
    }

    #[test]
    fn a_continuation_that_starts_afresh_loses_what_was_said() {
        assert_eq!(filtered("Paris is the", &["Paris", " is the", " capital of France."]), " capital of France.");
    }

    #[test]
    fn repeated_last_words_are_dropped() {
        assert_eq!(filtered("Paris is the capital", &["the capital of", " France."]), " of France.");
        assert_eq!(filtered("It has two million people. ", &["people. It is", " old."]), "It is old.");
    }

    #[test]
    fn a_continuation_that_repeats_nothing_passes_whole() {
        assert_eq!(filtered("Paris is the capital", &["of Fra", "nce."]), " of France.");
        assert_eq!(filtered("Paris is the capital", &[", and a city."]), ", and a city.");
    }

    #[test]
    fn a_continuation_that_only_repeats_says_nothing() {
        assert_eq!(filtered("Paris is the capital.", &["Paris is the capital."]), "");
    }

    #[test]
    fn the_request_carries_what_was_said_and_the_instruction() {
        let request = ChatRequest {
            model: "m".into(),
            messages: vec![ChatMessage::new("user", "Capital of France?")],
            tools: Vec::new(),
            max_tokens: 10,
            temperature: 0.0,
            stop: Vec::new(),
        };
        let continued = continuation_request(&request, "Paris is");
        let roles: Vec<&str> = continued.messages.iter().map(|m| m.role.as_str()).collect();
        assert_eq!(roles, ["user", "assistant", "system"]);
        assert_eq!(continued.messages[1].content, "Paris is");
    }
}
