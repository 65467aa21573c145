//! How the domain reads and writes rows beyond one entity at a time: keyset pages for the
//! lists that grow ([`paging`]), many rows in one statement whose text does not depend on
//! their number ([`rows`]), and SQLite reads that stay on the request's thread ([`inline`]).

pub mod inline;
pub mod paging;
pub mod rows;
