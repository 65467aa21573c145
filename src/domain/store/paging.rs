//! Keyset (seek) pages, for every list that can grow (sessions, scheduling history): a page
//! starts after or before a position (the sort-key values of a row), so it costs the same
//! wherever it is. A position is the domain's; how a client carries it is the transport's.

use crate::domain::{DomainError, DomainResult};

pub const DEFAULT_PAGE_SIZE: u64 = 50;
pub const MAX_PAGE_SIZE: u64 = 500;

/// Which page to read: `size` rows after `after` (forwards), or the `size` rows just
/// before `before` (backwards, when `last` was given).
#[derive(Clone, Debug, PartialEq)]
pub struct PageRequest<P> {
    pub size: u64,
    pub backward: bool,
    pub after: Option<P>,
    pub before: Option<P>,
}

impl<P> Default for PageRequest<P> {
    fn default() -> Self {
        Self { size: DEFAULT_PAGE_SIZE, backward: false, after: None, before: None }
    }
}

/// One page of rows, in the list's order.
#[derive(Clone, Debug)]
pub struct Page<T> {
    pub rows: Vec<T>,
    pub has_next_page: bool,
    pub has_previous_page: bool,
}

impl<P> PageRequest<P> {
    /// A request for the `first` rows after `after` or the `last` rows before `before`:
    /// sizes between 0 and [`MAX_PAGE_SIZE`] (default [`DEFAULT_PAGE_SIZE`]), never both
    /// directions at once.
    pub fn new(first: Option<i32>, last: Option<i32>, after: Option<P>, before: Option<P>) -> DomainResult<Self> {
        let check = |n: i32, field: &str| -> DomainResult<u64> {
            let n = u64::try_from(n).map_err(|_| {
                DomainError::bad_input("OUT_OF_RANGE", Some(field.to_owned()), "a page size cannot be negative")
            })?;
            if n > MAX_PAGE_SIZE {
                return Err(DomainError::bad_input(
                    "OUT_OF_RANGE",
                    Some(field.to_owned()),
                    format!("a page holds at most {MAX_PAGE_SIZE} rows"),
                ));
            }
            Ok(n)
        };
        let (size, backward) = match (first, last) {
            (Some(_), Some(_)) => {
                return Err(DomainError::bad_input(
                    "AMBIGUOUS_PAGE",
                    Some("last".to_owned()),
                    "ask for a page forwards or backwards, not both",
                ));
            }
            (Some(n), None) => (check(n, "first")?, false),
            (None, Some(n)) => (check(n, "last")?, true),
            (None, None) => (DEFAULT_PAGE_SIZE, before.is_some() && after.is_none()),
        };
        Ok(Self { size, backward, after, before })
    }

    /// How many rows to read: one more than the page, to know whether there are more.
    pub fn fetch_limit(&self) -> u64 {
        self.size + 1
    }

    /// The page from rows read in walk order (reversed order when backward), at most
    /// [`fetch_limit`](Self::fetch_limit) of them.
    pub fn finish<T>(&self, mut rows: Vec<T>) -> Page<T> {
        let has_more = rows.len() as u64 > self.size;
        rows.truncate(usize::try_from(self.size).unwrap_or(usize::MAX));
        if self.backward {
            rows.reverse();
        }
        Page {
            rows,
            has_next_page: if self.backward { self.before.is_some() } else { has_more },
            has_previous_page: if self.backward { has_more } else { self.after.is_some() },
        }
    }

    /// The same request with other positions (e.g. decoded and checked ones).
    pub fn with_positions<Q>(self, after: Option<Q>, before: Option<Q>) -> PageRequest<Q> {
        PageRequest { size: self.size, backward: self.backward, after, before }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(first: Option<i32>, last: Option<i32>) -> DomainResult<PageRequest<u8>> {
        PageRequest::new(first, last, None, None)
    }

    #[test]
    fn page_sizes_are_bounded() {
        assert_eq!(req(None, None).ok().map(|r| (r.size, r.backward)), Some((50, false)));
        assert_eq!(req(Some(500), None).ok().map(|r| (r.size, r.backward)), Some((500, false)));
        assert_eq!(req(None, Some(3)).ok().map(|r| (r.size, r.backward)), Some((3, true)));
        assert_eq!(req(Some(0), None).ok().map(|r| r.size), Some(0));
        for bad in [req(Some(501), None), req(Some(-1), None), req(None, Some(501)), req(Some(1), Some(1))] {
            assert!(matches!(bad, Err(DomainError::BadInput(_))));
        }
        let before_only = PageRequest::new(None, None, None, Some(1u8)).ok().map(|r| r.backward);
        assert_eq!(before_only, Some(true), "`before` alone reads backwards");
    }

    #[test]
    fn finishing_a_page_reports_what_lies_beyond() {
        let forward = PageRequest { size: 2, backward: false, after: Some(0u8), before: None };
        let page = forward.finish(vec![1, 2, 3]);
        assert_eq!((page.rows, page.has_next_page, page.has_previous_page), (vec![1, 2], true, true));
        let page = forward.finish(vec![1]);
        assert_eq!((page.rows, page.has_next_page), (vec![1], false));
        let backward = PageRequest { size: 2, backward: true, after: None, before: Some(9u8) };
        let page = backward.finish(vec![8, 7, 6]);
        assert_eq!((page.rows, page.has_next_page, page.has_previous_page), (vec![7, 8], true, true));
    }
}
