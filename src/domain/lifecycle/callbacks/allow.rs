//! Where callbacks may go: the `--callback-allow` list, and the guard against a callback
//! that would make the server call into its own network (SSRF).
//!
//! A pattern is `host[:port]`; `*` stands for exactly one label (`*.hooks.example.com`
//! allows `a.hooks.example.com`, not `hooks.example.com` nor `a.b.hooks.example.com`), and
//! a pattern without a port allows every port. A URL's host must match a pattern, and then
//! every address it resolves to must be public (not loopback, private, link-local, shared,
//! unspecified, multicast or reserved) unless a pattern with no `*` names that very host:
//! `127.0.0.1:9000` allows a receiver on the loopback port 9000, `*:9000` does not. The
//! addresses are checked when the call is made, on the addresses the call then connects to.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use url::Url;

use crate::domain::InputProblem;

/// The longest callback URL accepted.
pub const MAX_URL: usize = 2048;

/// One `host[:port]` pattern.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Pattern {
    /// Lower-case labels, `*` for any one.
    labels: Vec<String>,
    port: Option<u16>,
}

impl Pattern {
    fn parse(text: &str) -> Result<Self, String> {
        let bad = |why: &str| format!("`{text}` is not a `host[:port]` pattern: {why}");
        let port = |p: &str| match p.parse::<u16>() {
            Ok(0) | Err(_) => Err(bad("a port is 1 to 65535")),
            Ok(p) => Ok(Some(p)),
        };
        // An IPv6 literal with a port is written in brackets, as in a URL; without brackets
        // a text of several colons is an address alone (`::1:9000` is one address).
        let (host, port) = if let Some(rest) = text.strip_prefix('[') {
            match rest.split_once(']') {
                Some((h, "")) => (h, None),
                Some((h, p)) => (h, port(p.strip_prefix(':').ok_or_else(|| bad("`]` is followed by `:port`"))?)?),
                None => return Err(bad("`[` without `]`")),
            }
        } else if text.matches(':').count() > 1 {
            text.parse::<Ipv6Addr>()
                .map_err(|_| bad("not an IPv6 address (write one with a port as `[addr]:port`)"))?;
            (text, None)
        } else {
            match text.split_once(':') {
                Some((h, p)) => (h, port(p)?),
                None => (text, None),
            }
        };
        let host = host.to_ascii_lowercase();
        if host.contains(':') && host.parse::<Ipv6Addr>().is_err() {
            return Err(bad("not an IPv6 address"));
        }
        if host.is_empty() {
            return Err(bad("no host"));
        }
        if let Ok(ip) = host.parse::<Ipv6Addr>() {
            // As a URL's host is compared: the address's own short form.
            return Ok(Self { labels: vec![ip.to_string()], port });
        }
        let labels: Vec<String> = host.split('.').map(str::to_owned).collect();
        for l in &labels {
            let ok =
                l == "*" || (!l.is_empty() && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_'));
            if !ok {
                return Err(bad("a label is empty or holds something other than letters, digits, `-`, `_` or `*`"));
            }
        }
        Ok(Self { labels, port })
    }

    fn wildcard(&self) -> bool {
        self.labels.iter().any(|l| l == "*")
    }

    fn matches(&self, host: &str, port: u16) -> bool {
        if self.port.is_some_and(|p| p != port) {
            return false;
        }
        if host.parse::<Ipv6Addr>().is_ok() {
            return self.labels.len() == 1 && self.labels[0] == host;
        }
        let labels: Vec<&str> = host.split('.').collect();
        labels.len() == self.labels.len() && self.labels.iter().zip(labels).all(|(p, l)| p == "*" || p == l)
    }
}

impl std::fmt::Display for Pattern {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let host = self.labels.join(".");
        let host = if host.contains(':') { format!("[{host}]") } else { host };
        match self.port {
            Some(p) => write!(f, "{host}:{p}"),
            None => write!(f, "{host}"),
        }
    }
}

/// How a host matched the list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Allowed {
    /// A pattern with no `*` names it: it may be a loopback or private address.
    Named,
    /// Only through a `*`: it must resolve to public addresses.
    Wildcard,
}

/// The `--callback-allow` list. Empty (the default): no callback at all.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Allow {
    patterns: Vec<Pattern>,
}

impl std::fmt::Display for Allow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let shown: Vec<String> = self.patterns.iter().map(ToString::to_string).collect();
        f.write_str(&shown.join(","))
    }
}

impl Allow {
    /// Comma-separated patterns; blanks around them are ignored.
    pub fn parse(text: &str) -> Result<Self, String> {
        let patterns =
            text.split(',').map(str::trim).filter(|p| !p.is_empty()).map(Pattern::parse).collect::<Result<_, _>>()?;
        Ok(Self { patterns })
    }

    pub fn is_empty(&self) -> bool {
        self.patterns.is_empty()
    }

    /// Whether `host` (lower case, an IPv6 literal without brackets) at `port` may be
    /// called, and how: a pattern naming it wins over a wildcard.
    pub fn allows(&self, host: &str, port: u16) -> Option<Allowed> {
        let host = host.trim_start_matches('[').trim_end_matches(']').to_ascii_lowercase();
        let mut found = None;
        for p in self.patterns.iter().filter(|p| p.matches(&host, port)) {
            if !p.wildcard() {
                return Some(Allowed::Named);
            }
            found = Some(Allowed::Wildcard);
        }
        found
    }

    /// The URL `text` as a callback target, or why not. Checks the form and the list; an
    /// address the host is written as is checked here too, a name's addresses when called.
    pub fn check(&self, field: &str, text: &str) -> Result<Target, InputProblem> {
        let problem = |code: &str, message: String| InputProblem::new(code, Some(field.to_owned()), message);
        if self.is_empty() {
            return Err(problem(
                "CALLBACKS_DISABLED",
                "this server calls no callback URL (its administrator allows hosts with --callback-allow)".to_owned(),
            ));
        }
        let target = Target::parse(text).map_err(|why| problem("INVALID_CALLBACK_URL", why))?;
        let Some(how) = self.allows(&target.host, target.port) else {
            return Err(problem(
                "CALLBACK_NOT_ALLOWED",
                format!("this server may not call `{}:{}` (not in --callback-allow)", target.host, target.port),
            ));
        };
        if let Ok(ip) = target.host.parse::<IpAddr>()
            && how == Allowed::Wildcard
            && restricted(ip)
        {
            return Err(problem(
                "CALLBACK_NOT_ALLOWED",
                format!("`{ip}` is not a public address, and no pattern of --callback-allow names it"),
            ));
        }
        Ok(target)
    }
}

/// A callback URL, checked for form.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    pub url: Url,
    /// Lower case; an IPv6 literal without brackets.
    pub host: String,
    pub port: u16,
}

impl Target {
    pub fn parse(text: &str) -> Result<Self, String> {
        if text.len() > MAX_URL {
            return Err(format!("a callback URL has at most {MAX_URL} bytes"));
        }
        let mut url = Url::parse(text).map_err(|e| format!("not a URL: {e}"))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err("a callback URL is http or https".to_owned());
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err("a callback URL carries no user name or password".to_owned());
        }
        if url.fragment().is_some() {
            return Err("a callback URL has no fragment".to_owned());
        }
        let host = match url.host() {
            Some(url::Host::Domain(d)) => d.trim_end_matches('.').to_ascii_lowercase(),
            Some(url::Host::Ipv4(ip)) => ip.to_string(),
            Some(url::Host::Ipv6(ip)) => ip.to_string(),
            None => return Err("a callback URL names a host".to_owned()),
        };
        let port = url.port_or_known_default().ok_or("a callback URL has a port")?;
        if port == 0 {
            return Err("a callback URL's port is not 0".to_owned());
        }
        // One spelling of the host for the check, the call and its `Host` header: `name.`
        // is `name` (the deliverer connects only to the addresses checked for it anyway).
        if matches!(url.host(), Some(url::Host::Domain(d)) if d != host) {
            url.set_host(Some(&host)).map_err(|e| format!("not a URL: {e}"))?;
        }
        Ok(Self { url, host, port })
    }
}

/// Whether `ip` is an address a callback may reach only when a pattern names its host:
/// anything but a public unicast address.
pub fn restricted(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => restricted_v4(v4),
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return restricted_v4(v4);
            }
            let first = v6.segments()[0];
            v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                || (first & 0xfe00) == 0xfc00 // unique local
                || (first & 0xffc0) == 0xfe80 // link-local
                || (first & 0xffc0) == 0xfec0 // site-local (deprecated)
                || (first == 0x2001 && v6.segments()[1] == 0x0db8) // documentation
                || (first == 0x0064 && v6.segments()[1] == 0xff9b) // NAT64 of any IPv4
                || (first == 0x2002) // 6to4 of any IPv4
                || v6.segments()[..6] == [0, 0, 0, 0, 0, 0] // IPv4-compatible
        }
    }
}

fn restricted_v4(ip: Ipv4Addr) -> bool {
    let [a, b, ..] = ip.octets();
    ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local()
        || ip.is_unspecified()
        || ip.is_broadcast()
        || ip.is_multicast()
        || ip.is_documentation()
        || a == 0 // "this network"
        || (a == 100 && (64..128).contains(&b)) // shared (CGNAT)
        || (a == 192 && b == 0 && ip.octets()[2] == 0) // IETF protocol assignments
        || (a == 198 && (b == 18 || b == 19)) // benchmarking
        || a >= 240 // reserved
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_match_one_label_per_star_and_any_port_without_one() {
        let allow =
            Allow::parse(" *.hooks.example.com , ci.example.org:8443,127.0.0.1:9000, [::1]:9001").expect("valid");
        assert_eq!(allow.allows("a.hooks.example.com", 443), Some(Allowed::Wildcard));
        assert_eq!(allow.allows("A.Hooks.Example.com", 80), Some(Allowed::Wildcard));
        assert_eq!(allow.allows("hooks.example.com", 443), None);
        assert_eq!(allow.allows("a.b.hooks.example.com", 443), None);
        assert_eq!(allow.allows("ci.example.org", 8443), Some(Allowed::Named));
        assert_eq!(allow.allows("ci.example.org", 443), None);
        assert_eq!(allow.allows("127.0.0.1", 9000), Some(Allowed::Named));
        assert_eq!(allow.allows("127.0.0.1", 9002), None);
        assert_eq!(allow.allows("::1", 9001), Some(Allowed::Named));
        assert_eq!(allow.allows("[::1]", 9001), Some(Allowed::Named));
        assert!(Allow::parse("").expect("valid").is_empty());
        for bad in ["a..b", "host:port", "ex ample.com", "a/b", ":80", "host:0", "[::1]:0", "[::1", "[::1]9000", "::g"]
        {
            assert!(Allow::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn an_ipv6_address_takes_a_port_only_in_brackets() {
        // Unbracketed, every colon belongs to the address: `::1:9000` is not `::1` port 9000.
        let bare = Allow::parse("::1:9000").expect("an address");
        assert_eq!(bare.allows("::1:9000", 443), Some(Allowed::Named));
        assert_eq!(bare.allows("::1", 9000), None);
        let bracketed = Allow::parse("[::1]:9000,[fd00::1]").expect("valid");
        assert_eq!(bracketed.allows("::1", 9000), Some(Allowed::Named));
        assert_eq!(bracketed.allows("::1", 9001), None);
        assert_eq!(bracketed.allows("fd00::1", 1), Some(Allowed::Named));
        assert_eq!(bracketed.to_string(), "[::1]:9000,[fd00::1]");
    }

    #[test]
    fn a_final_dot_names_the_same_host_for_the_check_and_the_call() {
        let t = Target::parse("http://x.hooks.test.:18494/hook?a=1").expect("valid");
        assert_eq!((t.host.as_str(), t.port), ("x.hooks.test", 18494));
        assert_eq!(t.url.as_str(), "http://x.hooks.test:18494/hook?a=1");
        assert!(Target::parse("http://x.hooks.test:0/").is_err());
    }

    #[test]
    fn a_named_host_beats_a_wildcard() {
        let allow = Allow::parse("*:9000,localhost:9000").expect("valid");
        assert_eq!(allow.allows("localhost", 9000), Some(Allowed::Named));
        assert_eq!(allow.allows("other", 9000), Some(Allowed::Wildcard));
    }

    #[test]
    fn urls_are_checked_for_form_and_list() {
        let allow = Allow::parse("*.example.com,127.0.0.1:9000,127.0.0.*").expect("valid");
        let code = |url: &str| allow.check("callback_url", url).err().map(|p| p.code);
        assert_eq!(code("https://a.example.com/hook?x=1"), None);
        assert_eq!(code("http://127.0.0.1:9000/done"), None);
        assert_eq!(code("ftp://a.example.com/"), Some("INVALID_CALLBACK_URL".into()));
        assert_eq!(code("https://user:pw@a.example.com/"), Some("INVALID_CALLBACK_URL".into()));
        assert_eq!(code("not a url"), Some("INVALID_CALLBACK_URL".into()));
        assert_eq!(
            code(&format!("https://a.example.com/{}", "x".repeat(MAX_URL))),
            Some("INVALID_CALLBACK_URL".into())
        );
        assert_eq!(code("https://evil.test/"), Some("CALLBACK_NOT_ALLOWED".into()));
        assert_eq!(
            code("http://127.0.0.1:9001/"),
            Some("CALLBACK_NOT_ALLOWED".into()),
            "a wildcard is no loopback pass"
        );
        assert_eq!(code("http://127.0.0.1:9000/"), None);
        let none = Allow::default();
        assert_eq!(none.check("f", "https://a.example.com/").expect_err("refused").code, "CALLBACKS_DISABLED");
    }

    #[test]
    fn only_public_addresses_are_unrestricted() {
        for private in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "255.255.255.255",
            "224.0.0.1",
            "::1",
            "::",
            "fe80::1",
            "fd00::1",
            "::ffff:127.0.0.1",
            "::ffff:169.254.169.254",
            "64:ff9b::a9fe:a9fe",
        ] {
            assert!(restricted(private.parse().expect("valid")), "{private}");
        }
        for public in ["93.184.216.34", "8.8.8.8", "2606:4700::1111"] {
            assert!(!restricted(public.parse().expect("valid")), "{public}");
        }
    }
}
