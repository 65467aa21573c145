//! Who and what the platform has: tokens and the viewers they authenticate ([`auth`]),
//! credentials that change under open connections ([`credentials`]), what may be launched
//! ([`catalog`]), the configuration as superadministrators see it ([`configuration`]) and
//! as `sessiond apply` declares it ([`apply`]), the server's own keys ([`secrets`]), and the
//! demo's data ([`seed`]) and generated sessions ([`generate`]).

pub mod apply;
pub mod auth;
pub mod catalog;
pub mod configuration;
pub mod credentials;
pub mod generate;
pub mod secrets;
pub mod seed;
