//! The SSRF guard for outbound requests (webhooks; later tools and MCP): a target is refused when any
//! address it resolves to is loopback, private, link-local, shared (CGNAT), unspecified, multicast,
//! documentation or otherwise reserved — unless configuration allows private targets (tests do).
//! The check runs inside the HTTP client's resolver, so the address connected to is the one checked,
//! and redirects are never followed.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

/// True for addresses a webhook must not reach.
pub fn is_forbidden(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => forbidden_v4(v4),
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return forbidden_v4(v4);
            }
            let first = v6.segments()[0];
            v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                || (first & 0xfe00) == 0xfc00 // unique local
                || (first & 0xffc0) == 0xfe80 // link-local
                || first == 0x2001 && v6.segments()[1] == 0x0db8 // documentation
                || first == 0x0064 && v6.segments()[1] == 0xff9b // NAT64
        }
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
        || (a == 198 && (b == 18 || b == 19)) // benchmarking
        || a >= 240 // reserved
}

/// A resolver for reqwest that refuses forbidden addresses (unless `allow_private`).
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
                let message = format!("{host} resolves to {}, which webhooks may not reach", bad.ip());
                return Err(message.into());
            }
            Ok(Box::new(addresses.into_iter()) as Box<dyn Iterator<Item = SocketAddr> + Send>)
        })
    }
}

/// Checks a URL whose host is an IP literal (the resolver is not asked about those).
pub fn check_literal_host(url: &url::Url, allow_private: bool) -> Result<(), String> {
    let ip = match url.host() {
        Some(url::Host::Ipv4(ip)) => IpAddr::V4(ip),
        Some(url::Host::Ipv6(ip)) => IpAddr::V6(ip),
        Some(url::Host::Domain(_)) => return Ok(()),
        None => return Err("the URL has no host".into()),
    };
    if !allow_private && is_forbidden(ip) {
        return Err(format!("{ip} is an address webhooks may not reach"));
    }
    Ok(())
}

/// An HTTP client for outbound calls: the guard in its resolver, no redirects, bounded timeouts.
pub fn client(allow_private: bool, timeout: std::time::Duration) -> reqwest::Client {
    reqwest::Client::builder()
        .dns_resolver(std::sync::Arc::new(GuardedResolver { allow_private }))
        .redirect(reqwest::redirect::Policy::none())
        .connect_timeout(std::time::Duration::from_secs(5))
        .timeout(timeout)
        .build()
        .expect("an HTTP client with default TLS")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn private_and_reserved_ranges_are_forbidden() {
        for ip in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "0.0.0.0",
            "100.64.0.1",
            "224.0.0.1",
            "255.255.255.255",
            "192.0.2.1",
            "198.18.0.1",
            "240.0.0.1",
            "::1",
            "fe80::1",
            "fd00::1",
            "::ffff:127.0.0.1",
            "::",
        ] {
            assert!(is_forbidden(ip.parse().unwrap()), "{ip}");
        }
        for ip in ["93.184.216.34", "8.8.8.8", "2606:4700:4700::1111"] {
            assert!(!is_forbidden(ip.parse().unwrap()), "{ip}");
        }
    }

    #[test]
    fn literal_hosts_are_checked() {
        let url = |u: &str| url::Url::parse(u).unwrap();
        assert!(check_literal_host(&url("http://127.0.0.1:9/hook"), false).is_err());
        assert!(check_literal_host(&url("http://[::1]/hook"), false).is_err());
        assert!(check_literal_host(&url("http://127.0.0.1:9/hook"), true).is_ok());
        assert!(check_literal_host(&url("https://hooks.example.com/x"), false).is_ok());
    }

    #[tokio::test]
    async fn the_resolver_refuses_names_of_private_addresses() {
        let client = client(false, std::time::Duration::from_secs(2));
        let error = client.get("http://localhost:9/hook").send().await.unwrap_err();
        assert!(format!("{error:?}").contains("may not reach"), "{error:?}");
    }
}
