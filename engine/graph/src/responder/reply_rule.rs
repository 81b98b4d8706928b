//! Which of the user's turns the agent answers. A 1:1 call answers every turn; in a meeting, where people
//! also talk to each other, the agent answers when it is addressed (docs/meetings.md).

/// The rule, decided per committed turn from its transcript.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum ReplyRule {
    /// Every turn (1:1 calls; a meeting's `mode: "always"`).
    #[default]
    Always,
    /// Turns that say one of `names` (whole words, any case, punctuation ignored) or ask a question (the
    /// punctuation after the transcript's last word holds a `?`, as in `…France?` or `…France?,`: a
    /// recognizer sometimes adds a stray mark; the turn was committed after the speaker fell silent).
    Addressed { names: Vec<String> },
    /// Only turns that say the wake phrase (silent-observer use).
    WakePhrase(String),
    /// None: the agent listens and transcribes (a meeting's `mode: "observer"`).
    Never,
}

impl ReplyRule {
    /// Whether the agent answers the turn whose transcript is `text`.
    pub fn answers(&self, text: &str) -> bool {
        match self {
            ReplyRule::Always => true,
            ReplyRule::Never => false,
            ReplyRule::WakePhrase(phrase) => says(text, phrase),
            ReplyRule::Addressed { names } => asks(text) || names.iter().any(|name| says(text, name)),
        }
    }
}

/// Whether `text` ends as a question: a `?` among the marks after its last word.
fn asks(text: &str) -> bool {
    let last_word_end = text.trim_end_matches(|c: char| !c.is_alphanumeric()).len();
    text[last_word_end..].contains('?')
}

/// Lowercase words separated by single spaces, with a space at each end.
fn words(text: &str) -> String {
    let mut out = String::from(" ");
    for word in text.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()) {
        out.push_str(&word.to_lowercase());
        out.push(' ');
    }
    out
}

/// Whether `text` says `phrase` as whole words.
fn says(text: &str, phrase: &str) -> bool {
    let phrase = words(phrase);
    phrase.trim() != "" && words(text).contains(&phrase)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addressed(names: &[&str]) -> ReplyRule {
        ReplyRule::Addressed { names: names.iter().map(|n| n.to_string()).collect() }
    }

    #[test]
    fn addressed_turns_name_the_agent_or_ask() {
        let rule = addressed(&["Confab Notes", "Confab", "Ada"]);
        assert!(rule.answers("Confab, what time is it"));
        assert!(rule.answers("OK... confab notes: summarise please."));
        assert!(rule.answers("What is the capital of France?"));
        // A recognizer's stray mark after the question mark (heard in a meeting test on a loaded machine).
        assert!(rule.answers("What is the capital of France, dear Ardlephur?,"));
        assert!(rule.answers("Is it \"ready?\""));
        assert!(!rule.answers("Who? Nobody. Move on."));
        assert!(rule.answers("hey ADA."));
        assert!(!rule.answers("Let's move on to the next item."));
        assert!(!rule.answers("Confabulation is a word."));
        assert!(!rule.answers("Adam said so."));
        assert!(!rule.answers(""));
    }

    #[test]
    fn a_wake_phrase_alone_opens_a_turn() {
        let rule = ReplyRule::WakePhrase("hey notes".into());
        assert!(rule.answers("Hey, notes! Who owns the budget"));
        assert!(!rule.answers("Who owns the budget?"));
        assert!(!ReplyRule::WakePhrase(" ".into()).answers("anything"));
    }

    #[test]
    fn always_and_never() {
        assert!(ReplyRule::Always.answers("anything"));
        assert!(!ReplyRule::Never.answers("Confab?"));
    }
}
