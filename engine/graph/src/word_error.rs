//! Word error between what was said and a transcript of it: the measure the speech-to-text tests and the
//! voice-to-voice benchmark judge transcripts by. Words are lowercased runs of letters, digits and
//! apostrophes; punctuation does not count.

fn words(text: &str) -> Vec<String> {
    text.to_lowercase()
        .split(|c: char| !c.is_alphanumeric() && c != '\'')
        .filter(|w| !w.is_empty())
        .map(str::to_string)
        .collect()
}

/// Word-level edit distance between `reference` and `hypothesis`, and the reference's word count: their
/// ratio is the word error rate.
pub fn word_errors(reference: &str, hypothesis: &str) -> (usize, usize) {
    let (r, h) = (words(reference), words(hypothesis));
    let mut row: Vec<usize> = (0..=h.len()).collect();
    for (i, rw) in r.iter().enumerate() {
        let mut previous = row[0];
        row[0] = i + 1;
        for (j, hw) in h.iter().enumerate() {
            let substitution = previous + usize::from(rw != hw);
            previous = row[j + 1];
            row[j + 1] = substitution.min(row[j] + 1).min(row[j + 1] + 1);
        }
    }
    (row[h.len()], r.len())
}

/// The word error rate of `hypothesis` against `reference` (0 for an empty reference heard as nothing).
pub fn word_error_rate(reference: &str, hypothesis: &str) -> f32 {
    let (errors, words) = word_errors(reference, hypothesis);
    errors as f32 / words.max(1) as f32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_substitutions_insertions_and_deletions() {
        assert_eq!(word_error_rate("a b c d", "a b c d"), 0.0);
        assert_eq!(word_error_rate("a b c d", "a x c"), 0.5);
        assert_eq!(word_errors("What is the capital of France?", "what is the capital and friends"), (2, 6));
    }
}
