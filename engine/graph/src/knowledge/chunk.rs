//! Splits a document (plain text or Markdown) into chunks for retrieval: paragraphs grouped up to
//! `TARGET_WORDS`, a paragraph longer than `MAX_WORDS` cut at sentence ends (and, for a sentence longer
//! than that, every `MAX_WORDS` words). A Markdown heading starts a new chunk, and each chunk under it
//! begins with the heading's text, so that a chunk read alone still says what it is about. The
//! embedding model reads 256 word pieces at most: about 180 words.

/// Chunks are filled up to about this many words.
pub const TARGET_WORDS: usize = 120;
/// No chunk is longer than this many words (plus its heading).
pub const MAX_WORDS: usize = 160;

/// The document's chunks, in order.
pub fn chunk(document: &str) -> Vec<String> {
    let mut chunks = Vec::new();
    let mut heading = String::new();
    let mut current: Vec<String> = Vec::new();
    let mut words = 0;
    let flush = |current: &mut Vec<String>, words: &mut usize, heading: &str, chunks: &mut Vec<String>| {
        if !current.is_empty() {
            let body = current.join("\n\n");
            chunks.push(if heading.is_empty() { body } else { format!("{heading}\n\n{body}") });
            current.clear();
            *words = 0;
        }
    };
    for block in blocks(document) {
        if let Some(title) = heading_text(&block) {
            flush(&mut current, &mut words, &heading, &mut chunks);
            heading = title;
            continue;
        }
        for piece in split_long(&block) {
            let n = piece.split_whitespace().count();
            if words + n > TARGET_WORDS && !current.is_empty() {
                flush(&mut current, &mut words, &heading, &mut chunks);
            }
            words += n;
            current.push(piece);
        }
    }
    flush(&mut current, &mut words, &heading, &mut chunks);
    chunks
}

/// Paragraphs: runs of non-blank lines, whitespace-normalised; a heading line is a block of its own.
fn blocks(document: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut lines: Vec<&str> = Vec::new();
    let end = |lines: &mut Vec<&str>, blocks: &mut Vec<String>| {
        let text = lines.join(" ").split_whitespace().collect::<Vec<_>>().join(" ");
        if !text.is_empty() {
            blocks.push(text);
        }
        lines.clear();
    };
    for line in document.lines() {
        let trimmed = line.trim();
        if trimmed.is_empty() {
            end(&mut lines, &mut blocks);
        } else if heading_text(trimmed).is_some() {
            end(&mut lines, &mut blocks);
            blocks.push(trimmed.to_string());
        } else {
            lines.push(trimmed);
        }
    }
    end(&mut lines, &mut blocks);
    blocks
}

/// The text of a Markdown ATX heading (`# Title` … `###### Title`).
fn heading_text(block: &str) -> Option<String> {
    let hashes = block.chars().take_while(|c| *c == '#').count();
    let rest = &block[hashes..];
    ((1..=6).contains(&hashes) && rest.starts_with(' ') && !rest.trim().is_empty())
        .then(|| rest.trim().trim_end_matches('#').trim().to_string())
}

/// A paragraph of at most `MAX_WORDS` words as it is; a longer one cut at sentence ends into pieces of
/// about `TARGET_WORDS`, and any sentence longer than `MAX_WORDS` every `MAX_WORDS` words.
fn split_long(paragraph: &str) -> Vec<String> {
    if paragraph.split_whitespace().count() <= MAX_WORDS {
        return vec![paragraph.to_string()];
    }
    let mut pieces = Vec::new();
    let mut current: Vec<&str> = Vec::new();
    for word in paragraph.split_whitespace() {
        current.push(word);
        let sentence_end = word.ends_with(['.', '!', '?']);
        if (sentence_end && current.len() >= TARGET_WORDS) || current.len() >= MAX_WORDS {
            pieces.push(current.join(" "));
            current.clear();
        }
    }
    if !current.is_empty() {
        pieces.push(current.join(" "));
    }
    pieces
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paragraphs_group_and_headings_lead_their_chunks() {
        let document = "# Opening hours\n\nWe open at nine.\nWe close at five.\n\n## Holidays\n\nClosed on Sundays.";
        assert_eq!(
            chunk(document),
            ["Opening hours\n\nWe open at nine. We close at five.", "Holidays\n\nClosed on Sundays."]
        );
        assert!(chunk("  \n\n ").is_empty());
        assert_eq!(chunk("#hashtag is not a heading"), ["#hashtag is not a heading"]);
    }

    #[test]
    fn long_text_is_cut_at_sentence_ends_and_no_chunk_is_too_long() {
        let sentence = "The quick brown fox jumps over the lazy dog again and again today.";
        let paragraph = vec![sentence; 60].join(" ");
        let document = format!("{paragraph}\n\n{}", "word ".repeat(500));
        let chunks = chunk(&document);
        assert!(chunks.len() > 5);
        for chunk in &chunks {
            assert!(chunk.split_whitespace().count() <= MAX_WORDS, "{chunk}");
        }
        assert!(chunks[0].ends_with('.'), "cut at a sentence end");
        let words: usize = chunks.iter().map(|c| c.split_whitespace().count()).sum();
        assert_eq!(words, 60 * sentence.split_whitespace().count() + 500, "nothing lost, nothing repeated");
    }
}
