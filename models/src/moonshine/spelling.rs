//! Today's spelling of the words Moonshine at times writes as old books did: its training text holds
//! "to-night", "to-morrow" and "to-day", and reading with a beam (`beam`) takes them where they are as
//! likely as the one-word forms (Piper's "Please book a table for two people tonight." → "…to-night.").
//! A transcript is what the language model and the client read: it gets the words as people write them
//! now.

use std::borrow::Cow;

/// The old spellings and today's, lower case.
const OLD_SPELLINGS: [(&str, &str); 3] = [("to-day", "today"), ("to-night", "tonight"), ("to-morrow", "tomorrow")];

/// `text` with each old spelling (a whole word, any case of its first letter) in today's.
pub fn modern_spelling(text: &str) -> Cow<'_, str> {
    if !text.to_ascii_lowercase().contains("to-") {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(first) = rest.chars().next() {
        let word_end = rest.find(|c: char| !(c.is_alphanumeric() || c == '-')).unwrap_or(rest.len());
        if word_end == 0 {
            out.push(first);
            rest = &rest[first.len_utf8()..];
        } else {
            out.push_str(&today(&rest[..word_end]));
            rest = &rest[word_end..];
        }
    }
    Cow::Owned(out)
}

/// One word (or one separator) in today's spelling.
fn today(word: &str) -> Cow<'_, str> {
    let lower = word.to_ascii_lowercase();
    let Some((_, modern)) = OLD_SPELLINGS.iter().find(|(old, _)| *old == lower) else { return Cow::Borrowed(word) };
    if word.starts_with(|c: char| c.is_uppercase()) {
        let mut capital = modern[..1].to_uppercase();
        capital.push_str(&modern[1..]);
        Cow::Owned(capital)
    } else {
        Cow::Borrowed(modern)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn old_spellings_are_written_as_today() {
        assert_eq!(
            modern_spelling("Please book a table for two people to-night."),
            "Please book a table for two people tonight."
        );
        assert_eq!(modern_spelling("To-morrow, or to-day?"), "Tomorrow, or today?");
    }

    #[test]
    fn other_words_with_hyphens_stay_as_they_are() {
        assert_eq!(modern_spelling("A to-do list, up-to-date, two-way."), "A to-do list, up-to-date, two-way.");
        assert_eq!(modern_spelling("Go to-night-club"), "Go to-night-club");
        assert!(matches!(modern_spelling("What is the capital of France?"), Cow::Borrowed(_)));
    }
}
