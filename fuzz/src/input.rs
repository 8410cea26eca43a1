//! A byte reader over fuzz input with a fixed, documented layout, so that
//! `examples/seeds.rs` can write inputs by hand (see [`crate::apply::Op`]).
//! Reads past the end give zeros; [`Input::is_empty`] ends the op loop.

pub struct Input<'a> {
    data: &'a [u8],
}

impl<'a> Input<'a> {
    pub fn new(data: &'a [u8]) -> Input<'a> {
        Input { data }
    }

    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    pub fn byte(&mut self) -> u8 {
        match self.data.split_first() {
            Some((&b, rest)) => {
                self.data = rest;
                b
            }
            None => 0,
        }
    }

    /// Little-endian.
    pub fn u16(&mut self) -> u16 {
        u16::from(self.byte()) | (u16::from(self.byte()) << 8)
    }

    pub fn bool(&mut self) -> bool {
        self.byte() & 1 == 1
    }

    /// At most `n` bytes (fewer at the end of the input).
    pub fn bytes(&mut self, n: usize) -> &'a [u8] {
        let n = n.min(self.data.len());
        let (head, rest) = self.data.split_at(n);
        self.data = rest;
        head
    }

    /// One of `items`, by the next byte.
    pub fn pick<'b, T>(&mut self, items: &'b [T]) -> &'b T {
        &items[usize::from(self.byte()) % items.len()]
    }
}

/// Writes what [`Input`] reads, for the seed corpora.
#[derive(Default)]
pub struct Writer {
    pub bytes: Vec<u8>,
}

impl Writer {
    pub fn byte(&mut self, b: u8) -> &mut Self {
        self.bytes.push(b);
        self
    }

    pub fn u16(&mut self, v: u16) -> &mut Self {
        self.bytes.extend_from_slice(&v.to_le_bytes());
        self
    }

    pub fn raw(&mut self, bytes: &[u8]) -> &mut Self {
        self.bytes.extend_from_slice(bytes);
        self
    }
}
