//! A segment's terms: their texts back to back, numbered in order of
//! first appearance, and a hash table of those numbers to look a term up
//! by.
//!
//! A `HashMap<Arc<str>, u32>` beside a list of `Arc<str>` names cost each
//! term an allocation with a 16-byte header, a 16-byte name and a 24-byte
//! map slot; here a term costs its text, a 4-byte end and a 4-byte slot.

use std::hash::BuildHasher;

use hashbrown::HashTable;

/// A segment's terms by id, and the table that finds an id by text.
#[derive(Default)]
pub(super) struct Dictionary {
    /// Every term's text, back to back.
    text: String,
    /// Each term id's end in `text`.
    ends: Vec<u32>,
    ids: HashTable<u32>,
}

/// The hash of a term or name: the same in every segment and process run
/// (lookups only need it to agree with itself).
pub(super) fn text_hash(term: &str) -> u64 {
    foldhash::fast::FixedState::default().hash_one(term)
}

impl Dictionary {
    /// The id of `term`, if it is here.
    pub(super) fn get(&self, term: &str) -> Option<u32> {
        self.ids
            .find(text_hash(term), |&id| self.name(id) == term)
            .copied()
    }

    /// Whether `term` is here.
    pub(super) fn contains(&self, term: &str) -> bool {
        self.get(term).is_some()
    }

    /// The id of `term`, numbered next if it is new (and whether it was).
    pub(super) fn id_or_add(&mut self, term: &str) -> (u32, bool) {
        if let Some(id) = self.get(term) {
            return (id, false);
        }
        let id = self.ends.len() as u32;
        self.text.push_str(term);
        self.ends.push(self.text.len() as u32);
        let (text, ends) = (&self.text, &self.ends);
        self.ids.insert_unique(text_hash(term), id, |&other| {
            text_hash(name_in(text, ends, other))
        });
        (id, true)
    }

    /// The text of term `id` ("" for none).
    pub(super) fn name(&self, id: u32) -> &str {
        name_in(&self.text, &self.ends, id)
    }

    /// Every term's text, by id.
    pub(super) fn names(&self) -> impl Iterator<Item = &str> {
        (0..self.ends.len() as u32).map(|id| self.name(id))
    }

    /// The number of terms.
    pub(super) fn len(&self) -> usize {
        self.ends.len()
    }

    /// Gives back what growing left unused, once no term is added.
    pub(super) fn shrink_to_fit(&mut self) {
        self.text.shrink_to_fit();
        self.ends.shrink_to_fit();
        let (text, ends) = (&self.text, &self.ends);
        self.ids
            .shrink_to_fit(|&id| text_hash(name_in(text, ends, id)));
    }
}

/// Term `id`'s text in `text`, which ends at `ends[id]` ("" for none).
fn name_in<'t>(text: &'t str, ends: &[u32], id: u32) -> &'t str {
    let id = id as usize;
    let start = id
        .checked_sub(1)
        .and_then(|previous| ends.get(previous))
        .copied()
        .unwrap_or(0);
    let end = ends.get(id).copied().unwrap_or(start);
    text.get(start as usize..end as usize).unwrap_or("")
}

/// Some of a dictionary's terms in text order, to find the terms that
/// begin with a prefix. Beside each id it keeps the term's first eight
/// bytes as a number, which orders as the texts do: a lookup searches
/// those numbers, in one array, and reads texts only where they tie.
#[derive(Default)]
pub(super) struct SortedTerms {
    leading: Vec<u64>,
    ids: Vec<u32>,
}

/// The first eight bytes of `text`, zero-padded, as a big-endian number:
/// a text that sorts before another never gets a larger number.
fn leading_bytes(text: &str) -> u64 {
    let mut bytes = [0u8; 8];
    for (to, &from) in bytes.iter_mut().zip(text.as_bytes()) {
        *to = from;
    }
    u64::from_be_bytes(bytes)
}

impl SortedTerms {
    /// The terms of `dictionary` that `keep` keeps.
    pub(super) fn new(dictionary: &Dictionary, keep: impl Fn(&str) -> bool) -> SortedTerms {
        let mut ids: Vec<u32> = (0u32..)
            .zip(dictionary.names())
            .filter(|&(_, term)| keep(term))
            .map(|(id, _)| id)
            .collect();
        ids.sort_unstable_by(|&a, &b| dictionary.name(a).cmp(dictionary.name(b)));
        SortedTerms {
            leading: ids
                .iter()
                .map(|&id| leading_bytes(dictionary.name(id)))
                .collect(),
            ids,
        }
    }

    /// The kept terms of `dictionary` (the one it was made from) that
    /// begin with `prefix`, itself among them if kept, in text order.
    pub(super) fn beginning_with<'s>(
        &'s self,
        dictionary: &'s Dictionary,
        prefix: &'s str,
    ) -> impl Iterator<Item = &'s str> + 's {
        let key = leading_bytes(prefix);
        let mut from = self.leading.partition_point(|&k| k < key);
        // Terms whose first eight bytes are the prefix's may still sort
        // before it.
        while self.leading.get(from) == Some(&key)
            && self
                .ids
                .get(from)
                .is_some_and(|&id| dictionary.name(id) < prefix)
        {
            from += 1;
        }
        self.ids
            .get(from..)
            .unwrap_or(&[])
            .iter()
            .map(|&id| dictionary.name(id))
            .take_while(move |term| term.starts_with(prefix))
    }
}
