//! The prompt states a context keeps for reuse, as llama.cpp sequences of one unified key/value cache:
//! sequence [`WORKING`] is where each prompt is evaluated and each reply generated; sequences 1 ..=
//! [`PREFIX_STATES`] each hold a kept state (the cells of the tokens it covers), most recently used first.
//! Keeping a state and starting from one are sequence copies, which in a unified cache add a sequence id
//! to the cells already there: a kept state costs memory only for the cells no other sequence holds.

use std::collections::VecDeque;

use llama_cpp_2::context::LlamaContext;
use llama_cpp_2::token::LlamaToken;

/// Key/value states kept for prompt reuse.
pub const PREFIX_STATES: usize = 8;

/// The sequence prompts are evaluated and replies generated in.
pub(super) const WORKING: i32 = 0;

/// A kept state: the sequence whose cells hold exactly `tokens`' positions.
struct Kept {
    tokens: Vec<LlamaToken>,
    sequence: i32,
}

#[derive(Default)]
pub(super) struct KeptStates {
    /// Most recently used first.
    states: VecDeque<Kept>,
}

impl KeptStates {
    /// Sequences a context needs: the working one and one per kept state.
    pub(super) const SEQUENCES: u32 = PREFIX_STATES as u32 + 1;

    /// Empties the working sequence and fills it from the longest kept state whose tokens begin `prompt`
    /// (leaving at least one token to evaluate, whose logits start the reply). Returns how many of
    /// `prompt`'s tokens it holds: where evaluation starts.
    pub(super) fn start(&mut self, context: &mut LlamaContext<'_>, prompt: &[LlamaToken]) -> usize {
        clear(context, WORKING);
        let best = (0..self.states.len())
            .filter(|&i| {
                let kept = &self.states[i].tokens;
                kept.len() < prompt.len() && prompt.starts_with(kept)
            })
            .max_by_key(|&i| self.states[i].tokens.len());
        let Some(state) = best.and_then(|i| self.states.remove(i)) else { return 0 };
        let held = state.tokens.len();
        // Positions are below i32::MAX: a context holds far fewer.
        let _ = context.kv_cache_seq_cp(state.sequence, WORKING, None, None);
        self.states.push_front(state);
        held
    }

    /// Keeps the working sequence's first `tokens.len()` positions (which hold `tokens`) as a state,
    /// evicting the least recently used when all are taken.
    pub(super) fn keep(&mut self, context: &mut LlamaContext<'_>, tokens: &[LlamaToken]) {
        if let Some(i) = self.states.iter().position(|kept| kept.tokens == tokens) {
            let same = self.states.remove(i).expect("found");
            self.states.push_front(same);
            return;
        }
        let sequence = if self.states.len() < PREFIX_STATES {
            (1..=PREFIX_STATES as i32).find(|s| self.states.iter().all(|kept| kept.sequence != *s)).expect("a free one")
        } else {
            self.states.pop_back().expect("full").sequence
        };
        clear(context, sequence);
        let _ = context.kv_cache_seq_cp(WORKING, sequence, None, Some(tokens.len() as u32));
        self.states.push_front(Kept { tokens: tokens.to_vec(), sequence });
    }

    /// Forgets every kept state and frees its cells (the working sequence is left as it is).
    pub(super) fn forget(&mut self, context: &mut LlamaContext<'_>) {
        for kept in self.states.drain(..) {
            clear(context, kept.sequence);
        }
    }
}

/// Removes every cell of `sequence`.
fn clear(context: &mut LlamaContext<'_>, sequence: i32) {
    // Removing a whole sequence cannot fail (only a partial removal of a recurrent model's state can).
    let _ = context.clear_kv_cache_seq(Some(sequence as u32), None, None);
}
