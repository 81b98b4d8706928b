//! Beam search over the decoder's steps, apart from the model: which hypotheses live on after each step,
//! which have ended, and which text wins.
//!
//! Each step the decoder gives every live hypothesis the log-probabilities of its next token (one row
//! each, in live order). Of all one-token extensions the `width` most probable go on; an extension by the
//! end token ends its hypothesis instead, and search stops once `width` have ended (Whisper's rule). The
//! winner has the best log-probability over its length to the power [`LENGTH_PENALTY`].
//!
//! Greedy reading (width 1) is the special case: the most probable token each step.

/// How much a text's length excuses its lower log-probability: 0 sums the tokens' log-probabilities
/// (shorter texts win, words dropped: "nine o'clock" read "either clock"), 1 averages them (texts of more
/// tokens win: "to-night" over "tonight", "at dress" over "address"); measured on espeak-ng's and Piper's
/// questions in noise and quiet (`docs/performance.md`, Moonshine with a beam of four).
pub const LENGTH_PENALTY: f32 = 0.5;

/// One text being read: its tokens (without the start token) and their summed log-probability.
#[derive(Debug, Clone, PartialEq)]
struct Hypothesis {
    tokens: Vec<i64>,
    logprob: f32,
}

impl Hypothesis {
    /// Log-probability over the tokens' count (the end token's included) to the power [`LENGTH_PENALTY`].
    fn score(&self) -> f32 {
        self.logprob / ((self.tokens.len() + 1) as f32).powf(LENGTH_PENALTY)
    }
}

#[derive(Debug)]
pub struct BeamSearch {
    width: usize,
    end_token: i64,
    live: Vec<Hypothesis>,
    ended: Vec<Hypothesis>,
}

impl BeamSearch {
    /// A search keeping `width` (at least 1) hypotheses, starting from one empty text.
    pub fn new(width: usize, end_token: i64) -> BeamSearch {
        BeamSearch {
            width: width.max(1),
            end_token,
            live: vec![Hypothesis { tokens: Vec::new(), logprob: 0.0 }],
            ended: Vec::new(),
        }
    }

    /// How many hypotheses the next step reads (its batch).
    pub fn live(&self) -> usize {
        self.live.len()
    }

    /// Each live hypothesis's last token (`start_token` for the empty text), in live order.
    pub fn last_tokens(&self, start_token: i64) -> Vec<i64> {
        self.live.iter().map(|h| h.tokens.last().copied().unwrap_or(start_token)).collect()
    }

    /// Takes one row of next-token log-probabilities per live hypothesis (`rows.len()` = live × vocab)
    /// and moves the search on; returns, for each hypothesis now live, the row (old live index) it
    /// extends — the decoder's caches follow it.
    pub fn advance(&mut self, rows: &[f32], vocab: usize) -> Vec<usize> {
        let mut extensions: Vec<(f32, usize, i64)> = Vec::with_capacity(self.live.len() * self.width);
        for (row, logprobs) in rows.chunks_exact(vocab).enumerate().take(self.live.len()) {
            let base = self.live[row].logprob;
            for token in top_tokens(logprobs, self.width) {
                extensions.push((base + logprobs[token], row, token as i64));
            }
        }
        extensions.sort_by(|a, b| b.0.total_cmp(&a.0));
        let mut next = Vec::with_capacity(self.width);
        let mut parents = Vec::with_capacity(self.width);
        for (logprob, row, token) in extensions {
            if next.len() == self.width || self.ended.len() >= self.width {
                break;
            }
            if logprob == f32::NEG_INFINITY {
                continue;
            }
            let mut tokens = self.live[row].tokens.clone();
            if token == self.end_token {
                self.ended.push(Hypothesis { tokens, logprob });
                continue;
            }
            tokens.push(token);
            next.push(Hypothesis { tokens, logprob });
            parents.push(row);
        }
        self.live = next;
        parents
    }

    /// Enough hypotheses have ended, or none is left to read.
    pub fn is_done(&self) -> bool {
        self.ended.len() >= self.width || self.live.is_empty()
    }

    /// The best text: of the ended hypotheses, or of all when none has ended (the token limit reached).
    pub fn best(self) -> Vec<u32> {
        let pool = if self.ended.is_empty() { self.live } else { self.ended };
        pool.into_iter()
            .max_by(|a, b| a.score().total_cmp(&b.score()))
            .map(|h| h.tokens.into_iter().map(|t| t as u32).collect())
            .unwrap_or_default()
    }
}

/// The indices of the `k` largest values (in no particular order).
fn top_tokens(logprobs: &[f32], k: usize) -> impl Iterator<Item = usize> {
    let k = k.min(logprobs.len());
    let mut order: Vec<usize> = (0..logprobs.len()).collect();
    if k < order.len() {
        order.select_nth_unstable_by(k, |a, b| logprobs[*b].total_cmp(&logprobs[*a]));
    }
    order.truncate(k);
    order.into_iter()
}

/// Log-softmax of `logits`, in place.
pub fn log_softmax(logits: &mut [f32]) {
    let top = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let log_total = logits.iter().map(|l| (l - top).exp()).sum::<f32>().ln() + top;
    logits.iter_mut().for_each(|l| *l -= log_total);
}

#[cfg(test)]
mod tests {
    use super::*;

    const END: i64 = 0;

    /// Rows of log-probabilities over a vocabulary of four tokens (0 is the end token).
    fn rows(probabilities: &[[f32; 4]]) -> Vec<f32> {
        probabilities.iter().flatten().map(|p| p.ln()).collect()
    }

    #[test]
    fn a_wider_beam_finds_the_text_greedy_reading_misses() {
        // Token 1 looks best first (0.5 against 0.4), but everything after it is unsure; after token 2
        // the model is sure of token 3 and then of the end: 0.4 · 0.9 · 0.9 beats 0.5 · 0.3 · 0.9.
        let mut greedy = BeamSearch::new(1, END);
        let mut beam = BeamSearch::new(2, END);
        assert_eq!(greedy.advance(&rows(&[[0.0, 0.5, 0.4, 0.1]]), 4), vec![0]);
        assert_eq!(beam.advance(&rows(&[[0.0, 0.5, 0.4, 0.1]]), 4), vec![0, 0]);
        assert_eq!(beam.last_tokens(9), vec![1, 2]);
        // After 1: 3 at 0.3 (the rest spread); after 2: 3 at 0.9.
        assert_eq!(greedy.advance(&rows(&[[0.2, 0.25, 0.25, 0.3]]), 4), vec![0]);
        assert_eq!(beam.advance(&rows(&[[0.2, 0.25, 0.25, 0.3], [0.03, 0.03, 0.04, 0.9]]), 4), vec![1, 0]);
        assert_eq!(beam.last_tokens(9), vec![3, 3]);
        // Then the end, sure.
        assert!(greedy.advance(&rows(&[[0.9, 0.05, 0.03, 0.02]]), 4).is_empty());
        assert!(greedy.is_done());
        assert!(beam.advance(&rows(&[[0.9, 0.05, 0.03, 0.02], [0.9, 0.05, 0.03, 0.02]]), 4).is_empty());
        assert!(beam.is_done());
        assert_eq!(greedy.best(), vec![1, 3]);
        assert_eq!(beam.best(), vec![2, 3]);
    }

    #[test]
    fn a_masked_end_token_is_never_taken() {
        let mut search = BeamSearch::new(2, END);
        let mut first = rows(&[[0.7, 0.2, 0.1, 0.0]]);
        first[END as usize] = f32::NEG_INFINITY;
        assert_eq!(search.advance(&first, 4), vec![0, 0]);
        assert_eq!(search.last_tokens(9), vec![1, 2]);
    }

    #[test]
    fn without_an_ended_text_the_best_live_one_is_taken() {
        let mut search = BeamSearch::new(2, END);
        search.advance(&rows(&[[0.1, 0.6, 0.3, 0.0]]), 4);
        assert!(!search.is_done());
        assert_eq!(search.best(), vec![1]);
    }

    #[test]
    fn log_softmax_sums_to_one() {
        let mut logits = [1.0, 2.0, 3.0];
        log_softmax(&mut logits);
        let total: f32 = logits.iter().map(|l| l.exp()).sum();
        assert!((total - 1.0).abs() < 1e-6);
        assert!(logits[2] > logits[1]);
    }
}
