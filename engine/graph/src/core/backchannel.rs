//! Backchannels: what a listener says to show they are listening ("mm-hmm", "yeah, right", "okay",
//! laughter), told apart from speech that takes the turn ("wait", "no", a question). The words are data
//! (`backchannels_en.txt`, English), matched against a transcript of the speech that overlapped the agent
//! (`crate::core::interruption` asks for it).

use std::collections::HashSet;
use std::sync::OnceLock;

/// The English list, one word or phrase a line (`#` starts a comment).
const ENGLISH: &str = include_str!("backchannels_en.txt");
/// The longest phrase of the list, in words.
const LONGEST_PHRASE: usize = 3;

fn english() -> &'static HashSet<String> {
    static PHRASES: OnceLock<HashSet<String>> = OnceLock::new();
    PHRASES.get_or_init(|| {
        ENGLISH
            .lines()
            .map(str::trim)
            .filter(|line| !line.is_empty() && !line.starts_with('#'))
            .map(|line| words(line).join(" "))
            .collect()
    })
}

/// The words of `text` as the list spells them: lower case, punctuation dropped, hyphens split, a run of
/// one letter shortened to two.
pub fn words(text: &str) -> Vec<String> {
    let mut cleaned = String::with_capacity(text.len());
    for c in text.chars().flat_map(char::to_lowercase) {
        let c = if c.is_alphanumeric() || c == '\'' { c } else { ' ' };
        let run = cleaned.chars().rev().take_while(|&last| last == c).count();
        if c == ' ' || run < 2 {
            cleaned.push(c);
        }
    }
    cleaned.split_whitespace().map(str::to_string).collect()
}

/// Whether `text` (a transcript) is made only of backchannels: true for no words at all (a laugh, a
/// breath, a cough), false as soon as one word is not on the list.
pub fn only_backchannels(text: &str) -> bool {
    let words = words(text);
    let phrases = english();
    // Covered[i]: the first i words are a sequence of phrases of the list.
    let mut covered = vec![false; words.len() + 1];
    covered[0] = true;
    for end in 1..=words.len() {
        covered[end] = (1..=LONGEST_PHRASE.min(end))
            .any(|len| covered[end - len] && phrases.contains(&words[end - len..end].join(" ")));
    }
    covered[words.len()]
}

/// Whether transcript `text` goes on from the earlier transcript `earlier` of the same speech: it starts
/// with its words.
pub fn goes_on_from(text: &str, earlier: &str) -> bool {
    words(text).starts_with(&words(earlier))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_listeners_say_is_a_backchannel() {
        for text in
            ["Mm-hmm.", "Mhm", "Hmmm.", "Yeah, right.", "Okay, okay.", "Uh-huh, I see.", "Ha ha ha!", "", "Sure."]
        {
            assert!(only_backchannels(text), "{text:?}");
        }
    }

    #[test]
    fn what_takes_the_turn_is_not() {
        for text in ["Wait.", "Stop!", "No.", "Sorry?", "Yeah, but what about Monday?", "Okay, stop.", "Right now."] {
            assert!(!only_backchannels(text), "{text:?}");
        }
    }

    #[test]
    fn a_later_transcript_goes_on_from_an_earlier_one_when_it_keeps_its_words() {
        assert!(goes_on_from("Yeah, right, wait.", "Yeah, right."));
        assert!(goes_on_from("Yeah right", "Yeah."));
        assert!(goes_on_from("What?", ""));
        assert!(!goes_on_from("The F. Riot.", "Yeah, right."));
    }

    #[test]
    fn every_line_of_the_list_is_a_backchannel_and_the_longest_fits() {
        for phrase in english() {
            assert!(phrase.split(' ').count() <= LONGEST_PHRASE, "{phrase}");
            assert!(only_backchannels(phrase), "{phrase}");
        }
    }
}
