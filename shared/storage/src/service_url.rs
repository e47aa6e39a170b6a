//! URLs of the services lakemirror sends a token to (Unity Catalog, an Iceberg REST catalog):
//! where plain http is allowed, and how a name becomes one path segment.

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};

/// Whether `url`'s host is this machine (`localhost` or a loopback address): the only place
/// a token and table definitions may travel to over plain http.
pub fn on_this_machine(url: &url::Url) -> bool {
    match url.host() {
        Some(url::Host::Domain(name)) => name == "localhost",
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    }
}

/// Characters a path segment keeps as they are (`.` too: Unity Catalog's full names are
/// `a.b.c`).
const SEGMENT: &AsciiSet = &NON_ALPHANUMERIC.remove(b'.').remove(b'_').remove(b'-');

/// `value` as one URL path segment (or query value), percent-encoded.
pub fn path_segment(value: &str) -> String {
    utf8_percent_encode(value, SEGMENT).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_hosts_are_this_machine() {
        for (url, here) in [
            ("http://127.0.0.1:8181", true),
            ("http://localhost/x", true),
            ("http://[::1]:80", true),
            ("http://10.0.0.1", false),
            ("http://catalog.example.com", false),
            ("http://localhost.example.com", false),
        ] {
            assert_eq!(
                on_this_machine(&url::Url::parse(url).unwrap()),
                here,
                "{url}"
            );
        }
    }

    #[test]
    fn a_segment_cannot_break_out_of_its_place() {
        assert_eq!(path_segment("a.b_c-d"), "a.b_c-d");
        assert_eq!(path_segment("../x/y?z#w"), "..%2Fx%2Fy%3Fz%23w");
        assert_eq!(path_segment("é %"), "%C3%A9%20%25");
    }
}
