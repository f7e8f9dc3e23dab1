//! Many short lists held in one allocation, indexed by list number.

/// Lists `0..n` of `T`, back to back: list `i` is
/// `items[starts[i]..starts[i + 1]]`. A `Vec` per list costs a 24-byte
/// header and an allocation each, for lists of a few items.
#[derive(Debug)]
pub(super) struct Lists<T> {
    starts: Vec<u32>,
    items: Vec<T>,
}

impl<T> Default for Lists<T> {
    fn default() -> Self {
        Lists {
            starts: Vec::new(),
            items: Vec::new(),
        }
    }
}

impl<T: Copy> Lists<T> {
    /// The same lists, flattened.
    pub(super) fn from_lists(lists: &[Vec<T>]) -> Lists<T> {
        let mut starts = Vec::with_capacity(lists.len() + 1);
        let mut items = Vec::with_capacity(lists.iter().map(Vec::len).sum());
        for list in lists {
            starts.push(items.len() as u32);
            items.extend_from_slice(list);
        }
        starts.push(items.len() as u32);
        Lists { starts, items }
    }

    /// List `i` (empty past the last).
    pub(super) fn of(&self, i: u32) -> &[T] {
        let i = i as usize;
        match (self.starts.get(i), self.starts.get(i + 1)) {
            (Some(&from), Some(&to)) => self.items.get(from as usize..to as usize).unwrap_or(&[]),
            _ => &[],
        }
    }
}

/// Values under sorted keys, in two flat arrays: a key's values are one
/// run, found by binary search. For maps from small keys to short lists,
/// where a hash map of `Vec`s costs a header, an allocation and a slot per
/// key.
#[derive(Debug)]
pub(super) struct KeyedLists<K, V> {
    keys: Vec<K>,
    values: Vec<V>,
}

impl<K, V> Default for KeyedLists<K, V> {
    fn default() -> Self {
        KeyedLists {
            keys: Vec::new(),
            values: Vec::new(),
        }
    }
}

impl<K: Ord + Copy, V: Ord + Copy> KeyedLists<K, V> {
    /// From (key, value) pairs in any order; each key's values sorted,
    /// repeats dropped.
    pub(super) fn from_pairs(mut pairs: Vec<(K, V)>) -> KeyedLists<K, V> {
        pairs.sort_unstable();
        pairs.dedup();
        let (keys, values) = pairs.into_iter().unzip();
        KeyedLists { keys, values }
    }

    /// The values under `key`, in order.
    pub(super) fn get(&self, key: &K) -> &[V] {
        let from = self.keys.partition_point(|k| k < key);
        let to = from
            + self
                .keys
                .get(from..)
                .map_or(0, |rest| rest.partition_point(|k| k == key));
        self.values.get(from..to).unwrap_or(&[])
    }
}
