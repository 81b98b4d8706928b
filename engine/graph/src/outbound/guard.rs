//! The address guard for every outbound request Confab makes on a user's behalf (webhooks, tools, MCP
//! servers, guardrail callbacks): a target is refused when any address it resolves to is loopback,
//! private, link-local, shared (CGNAT), unspecified, broadcast, multicast, documentation, benchmarking or
//! otherwise reserved, in IPv4 or IPv6, including IPv6 forms that embed an IPv4 address (mapped,
//! compatible, 6to4, NAT64, Teredo) — unless configuration allows private targets (local development,
//! tests: `--allow-private-urls`).
//!
//! Names are checked inside the HTTP client's resolver, so the address connected to is the one checked.
//! IP literals never reach a resolver: `check_url` checks them (any notation the URL standard accepts —
//! decimal, octal, hex, short forms — is normalised by the URL parser before the check), before the
//! request and again on every redirect hop. Proxies from the environment are never used.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

/// Most redirect hops followed (each one checked) by clients that follow redirects.
pub const MAX_REDIRECTS: usize = 5;

/// True for addresses outbound requests must not reach.
pub fn is_forbidden(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => forbidden_v4(v4),
        IpAddr::V6(v6) => forbidden_v6(v6),
    }
}

fn forbidden_v4(ip: Ipv4Addr) -> bool {
    let [a, b, c, _] = ip.octets();
    ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local()
        || ip.is_unspecified()
        || ip.is_broadcast()
        || ip.is_multicast()
        || ip.is_documentation()
        || a == 0
        || (a == 100 && (64..128).contains(&b)) // shared address space (CGNAT)
        || (a == 192 && b == 0 && c == 0) // IETF protocol assignments
        || (a == 192 && b == 88 && c == 99) // 6to4 relay anycast
        || (a == 198 && (b == 18 || b == 19)) // benchmarking
        || a >= 240 // reserved
}

/// IPv6: only global unicast (2000::/3, the one range IANA allocates for the Internet) can pass, less its
/// special-purpose blocks; so unique-local, link- and site-local, multicast, loopback, unspecified,
/// IPv4-compatible, SIIT, NAT64 and discard-only forms are all refused. IPv4-mapped addresses are judged by
/// their IPv4 address, 6to4 by the IPv4 address inside.
fn forbidden_v6(ip: Ipv6Addr) -> bool {
    if let Some(v4) = ip.to_ipv4_mapped() {
        return forbidden_v4(v4);
    }
    let s = ip.segments();
    let embedded = |high: u16, low: u16| Ipv4Addr::new((high >> 8) as u8, high as u8, (low >> 8) as u8, low as u8);
    let global_unicast = (s[0] & 0xe000) == 0x2000;
    !global_unicast
        || (s[0] == 0x2001 && s[1] < 0x0200) // IETF protocol assignments: Teredo, benchmarking, ORCHID…
        || (s[0] == 0x2001 && s[1] == 0x0db8) // documentation
        || (s[0] == 0x3fff && s[1] < 0x1000) // documentation (2024)
        || (s[0] == 0x2002 && forbidden_v4(embedded(s[1], s[2]))) // 6to4 around a forbidden IPv4
}

/// Checks what can be checked without resolving: the scheme (http or https) and an IP-literal host.
pub fn check_url(url: &url::Url, allow_private: bool) -> Result<(), String> {
    if !matches!(url.scheme(), "http" | "https") {
        return Err(format!("{} URLs are not allowed; use http or https", url.scheme()));
    }
    let ip = match url.host() {
        Some(url::Host::Ipv4(ip)) => IpAddr::V4(ip),
        Some(url::Host::Ipv6(ip)) => IpAddr::V6(ip),
        Some(url::Host::Domain(_)) => return Ok(()),
        None => return Err("the URL has no host".into()),
    };
    if !allow_private && is_forbidden(ip) {
        return Err(format!("{ip} is a private or reserved address, which outbound requests may not reach"));
    }
    Ok(())
}

/// A resolver for reqwest that refuses names resolving to forbidden addresses (unless `allow_private`).
#[derive(Debug, Clone, Copy)]
pub struct GuardedResolver {
    pub allow_private: bool,
}

impl reqwest::dns::Resolve for GuardedResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let allow_private = self.allow_private;
        Box::pin(async move {
            let host = name.as_str().to_string();
            let addresses: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            if !allow_private && let Some(bad) = addresses.iter().find(|a| is_forbidden(a.ip())) {
                let message = format!("{host} resolves to {}, which outbound requests may not reach", bad.ip());
                return Err(message.into());
            }
            Ok(Box::new(addresses.into_iter()) as Box<dyn Iterator<Item = SocketAddr> + Send>)
        })
    }
}

/// An HTTP client for outbound calls: the guard in its resolver, no proxy from the environment,
/// bounded timeouts, and no redirects.
pub fn client(allow_private: bool, timeout: Duration) -> reqwest::Client {
    builder(allow_private, Some(timeout)).redirect(reqwest::redirect::Policy::none()).build().expect("an HTTP client")
}

/// Like `client`, but following up to `MAX_REDIRECTS` redirects, each target checked like the first.
pub fn client_following_redirects(allow_private: bool, timeout: Duration) -> reqwest::Client {
    builder(allow_private, Some(timeout)).redirect(redirect_policy(allow_private)).build().expect("an HTTP client")
}

/// Like `client`, but with no overall time limit (only the connection's): for long-lived streams (an MCP
/// server's SSE stream); callers bound each exchange themselves.
pub fn streaming_client(allow_private: bool) -> reqwest::Client {
    builder(allow_private, None).redirect(reqwest::redirect::Policy::none()).build().expect("an HTTP client")
}

/// Follows up to `MAX_REDIRECTS` hops, each target checked with `check_url` (names are checked by the
/// resolver when the hop connects).
fn redirect_policy(allow_private: bool) -> reqwest::redirect::Policy {
    reqwest::redirect::Policy::custom(move |attempt| {
        if attempt.previous().len() >= MAX_REDIRECTS {
            return attempt.error(format!("more than {MAX_REDIRECTS} redirects"));
        }
        match check_url(attempt.url(), allow_private) {
            Ok(()) => attempt.follow(),
            Err(refused) => attempt.error(format!("redirected to a refused address: {refused}")),
        }
    })
}

/// The guard in the resolver, no environment proxy, a connection timeout of 5 s (or `timeout` if shorter)
/// and, with `timeout`, an overall one.
fn builder(allow_private: bool, timeout: Option<Duration>) -> reqwest::ClientBuilder {
    let connect = Duration::from_secs(5);
    let builder = reqwest::Client::builder().dns_resolver(Arc::new(GuardedResolver { allow_private })).no_proxy();
    match timeout {
        Some(timeout) => builder.connect_timeout(connect.min(timeout)).timeout(timeout),
        None => builder.connect_timeout(connect),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Targets that must be refused, in the notations people use to slip past guards.
    const REFUSED: &[&str] = &[
        "http://127.0.0.1/",
        "http://127.0.0.1:8080/admin",
        "http://127.1/",
        "http://127.0.1/",
        "http://2130706433/",
        "http://0x7f000001/",
        "http://0x7f.0x0.0x0.0x1/",
        "http://0177.0.0.1/",
        "http://017700000001/",
        "http://0x7f.1/",
        "http://0/",
        "http://0.0.0.0/",
        "http://10.0.0.1/",
        "http://012.0.0.1/",
        "http://167772161/",
        "http://172.16.0.1/",
        "http://172.31.255.255/",
        "http://192.168.0.1/",
        "http://0xc0a80001/",
        "http://169.254.169.254/latest/meta-data/",
        "http://2852039166/",
        "http://100.64.0.1/",
        "http://100.127.255.254/",
        "http://224.0.0.1/",
        "http://239.255.255.250/",
        "http://255.255.255.255/",
        "http://240.0.0.1/",
        "http://192.0.0.8/",
        "http://192.0.2.1/",
        "http://198.18.0.1/",
        "http://198.51.100.1/",
        "http://203.0.113.1/",
        "http://[::1]/",
        "http://[0:0:0:0:0:0:0:1]/",
        "http://[::]/",
        "http://[::ffff:127.0.0.1]/",
        "http://[::ffff:7f00:1]/",
        "http://[0:0:0:0:0:ffff:10.0.0.1]/",
        "http://[::ffff:a9fe:a9fe]/",
        "http://[::127.0.0.1]/",
        "http://[fe80::1]/",
        "http://[fec0::1]/",
        "http://[fc00::1]/",
        "http://[fd12:3456::1]/",
        "http://[ff02::1]/",
        "http://[2001:db8::1]/",
        "http://[64:ff9b::7f00:1]/",
        "http://[64:ff9b::8.8.8.8]/",
        "http://[2002:7f00:1::]/",
        "http://[2002:c0a8:101::1]/",
        "http://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/",
        "http://[100::1]/",
        "http://[::ffff:0:7f00:1]/",
        "http://[::ffff:0:a9fe:a9fe]/",
        "http://[64:ff9b:1::a00:1]/",
        "http://[fec0:0:0:ffff::1]/",
        "http://[fd00:ec2::254]/",
        "http://[ff05::c]/",
        "http://[2001:2::1]/",
        "http://[3fff::1]/",
        "https://127.0.0.1:443/",
        "http://user:pass@127.0.0.1/",
        "http://127.000.000.001/",
        "http://[::ffff:0.0.0.0]/",
        "file:///etc/passwd",
        "gopher://127.0.0.1:6379/",
        "ftp://example.com/",
    ];

    #[test]
    fn every_private_or_reserved_form_is_refused() {
        assert!(REFUSED.len() >= 60);
        for form in REFUSED {
            let refused = match url::Url::parse(form) {
                Ok(url) => check_url(&url, false).is_err(),
                Err(_) => true, // a URL the client cannot even parse is not sent
            };
            assert!(refused, "{form} was allowed");
        }
    }

    #[test]
    fn public_addresses_and_names_pass_and_the_switch_lifts_the_guard() {
        for form in [
            "https://93.184.216.34/",
            "http://8.8.8.8/",
            "http://[2606:4700:4700::1111]/",
            "http://[2002:808:808::1]/",
            "https://hooks.example.com/x",
            "http://100.128.0.1/",
        ] {
            assert_eq!(check_url(&url::Url::parse(form).unwrap(), false), Ok(()), "{form}");
        }
        for form in ["http://127.0.0.1:9/hook", "http://[::1]/", "http://10.0.0.1/"] {
            assert_eq!(check_url(&url::Url::parse(form).unwrap(), true), Ok(()), "{form}");
        }
        assert!(check_url(&url::Url::parse("file:///etc/passwd").unwrap(), true).is_err());
    }

    #[tokio::test]
    async fn the_resolver_refuses_names_of_private_addresses() {
        let client = client(false, Duration::from_secs(2));
        for name in ["http://localhost:9/hook", "http://LOCALHOST:9/", "http://localhost:9@localhost:9/"] {
            let error = client.get(name).send().await.unwrap_err();
            assert!(format!("{error:?}").contains("may not reach"), "{name}: {error:?}");
        }
    }

    #[tokio::test]
    async fn a_redirect_to_a_private_address_is_refused() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        // A loopback server (reachable: the resolver's switch is on) that redirects to the metadata
        // address; the redirect policy has the guard on.
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                let mut buffer = [0u8; 1024];
                let _ = socket.read(&mut buffer).await;
                let response = "HTTP/1.1 302 Found\r\nlocation: http://169.254.169.254/latest/meta-data/\r\ncontent-length: 0\r\nconnection: close\r\n\r\n";
                let _ = socket.write_all(response.as_bytes()).await;
            }
        });
        let client = builder(true, Some(Duration::from_secs(2))).redirect(redirect_policy(false)).build().unwrap();
        let error = client.get(format!("http://127.0.0.1:{port}/")).send().await.unwrap_err();
        assert!(error.is_redirect(), "{error:?}");
        assert!(format!("{error:?}").contains("169.254.169.254"), "{error:?}");
    }
}
