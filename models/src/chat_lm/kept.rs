//! The prompt states a context keeps for reuse, as llama.cpp sequences of one unified key/value cache:
//! sequence [`WORKING`] is where each prompt is evaluated and each reply generated; sequences 1 ..=
//! [`PREFIX_STATES`] each hold a kept state (the cells of the tokens it covers), most recently used first.
//! A prompt starts from the kept state it shares the longest beginning with (a state kept after a reply
//! the user heard only part of still gives the prompt, the reply's first words and all before them).
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

    /// Empties the working sequence and fills it from the kept state that shares the longest beginning
    /// with `prompt` (its cells for those tokens only; at least one token is left to evaluate, whose logits
    /// start the reply). Returns how many of `prompt`'s tokens it holds: where evaluation starts.
    pub(super) fn start(&mut self, context: &mut LlamaContext<'_>, prompt: &[LlamaToken]) -> usize {
        clear(context, WORKING);
        let usable = prompt.len().saturating_sub(1);
        let shared = |kept: &Kept| kept.tokens.iter().zip(&prompt[..usable]).take_while(|(a, b)| a == b).count();
        let best = (0..self.states.len())
            .map(|i| (i, shared(&self.states[i])))
            .filter(|&(_, n)| n > 0)
            .max_by_key(|&(_, n)| n);
        let Some((index, held)) = best else { return 0 };
        let state = self.states.remove(index).expect("found");
        // Positions are below i32::MAX: a context holds far fewer.
        let _ = context.kv_cache_seq_cp(state.sequence, WORKING, None, Some(held as u32));
        self.states.push_front(state);
        held
    }

    /// Keeps the working sequence's first `tokens.len()` positions (which hold `tokens`) as a state,
    /// evicting the least recently used when all are taken. States whose tokens begin `tokens` are dropped:
    /// every prompt shares at least as long a beginning with the new one (a conversation keeps one state
    /// per branch, not one per turn).
    pub(super) fn keep(&mut self, context: &mut LlamaContext<'_>, tokens: &[LlamaToken]) {
        if let Some(i) = self.states.iter().position(|kept| kept.tokens == tokens) {
            let same = self.states.remove(i).expect("found");
            self.states.push_front(same);
            return;
        }
        while let Some(i) = self.states.iter().position(|kept| tokens.starts_with(&kept.tokens)) {
            let covered = self.states.remove(i).expect("found");
            clear(context, covered.sequence);
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
